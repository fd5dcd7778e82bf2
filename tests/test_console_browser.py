"""The console in a real browser: Debian's Chromium driven by Playwright, against the app served
on a loopback port and real worker.py processes.

Each test logs in as a platform admin and does what an operator would: watches the overview while
a worker drains a queue, pauses a queue (answering the dialog that asks first) and sees claims
stop, requeues a dead job in one click, runs a scheduled job now, looks at the graphs, and reads
the overview on a 1366 x 768 screen without scrolling sideways; an HR user's participant page
shows its own script still works under the Content-Security-Policy. Every page must load
without a console error, an uncaught exception or a Content-Security-Policy violation.
Screenshots go to test-artifacts/ (the best of them are kept in docs/screenshots/).
"""

import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright
from werkzeug.serving import WSGIRequestHandler, make_server

from jobqueue import JobRequest, enqueue, enqueue_many
from models.people import Role
from tests.support.db import create_test_tables, job_row, scalar
from tests.support.factories import (
    PASSWORD,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)
from tests.support.processes import ROOT, WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
# Runs in every page before its own scripts: keeps each CSP violation for the test to read.
RECORD_CSP_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  window.__cspViolations.push(`${event.violatedDirective} ${event.blockedURI}`);
});
"""
FIGURE = "tr[data-key='{queue}'] [data-field='{field}']"
# How many of a chart's series have pixels of their own colour inside the plot area (bars or
# points; the legend's colour boxes lie outside it).
PAINTED_SERIES = """canvas => {
    const chart = Chart.getChart(canvas);
    const scale = chart.currentDevicePixelRatio;
    const {left, top, right, bottom} = chart.chartArea;
    const pixels = canvas.getContext("2d").getImageData(left * scale, top * scale,
        (right - left) * scale, (bottom - top) * scale).data;
    const painted = (hex) => {
        const [r, g, b] = [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16));
        for (let i = 0; i < pixels.length; i += 4) {
            if (Math.abs(pixels[i] - r) + Math.abs(pixels[i + 1] - g)
                + Math.abs(pixels[i + 2] - b) < 12 && pixels[i + 3] > 200) return true;
        }
        return false;
    };
    return chart.data.datasets.filter((set) => set.data.some((v) => v > 0)
        && painted(set.borderColor)).length;
}"""
DRAWN = re.compile(r"^\d+$")  # charts.js stamps a canvas with the time it last drew it

pytestmark = pytest.mark.skipif(
    shutil.which(str(CHROMIUM)) is None,
    reason="Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any) -> None:
        """Not every request in the test's output; failures still show."""


@pytest.fixture
def server(app: Any, conn: Conn) -> Iterator[str]:
    """The app on a free loopback port, in a thread; yields its base URL."""
    create_test_tables(conn)
    http = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{http.server_port}"
    http.shutdown()
    thread.join(10)


@pytest.fixture
def page(browser: Browser, server: str, app: Any) -> Iterator[Page]:
    """A logged-in platform admin's tab."""
    with seeding(app) as session:
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
    with watched_tab(browser, server, admin) as tab:
        yield tab


@contextmanager
def watched_tab(
    browser: Browser,
    server: str,
    user: Any,
    width: int = 1400,
    height: int = 900,
    locale: str = "en-US",
) -> Iterator[Page]:
    """A tab logged in as ``user``, its browser asking for ``locale``'s language; at the end,
    fails on any console error or CSP violation."""
    context = browser.new_context(
        base_url=server, viewport={"width": width, "height": height}, locale=locale
    )
    context.add_init_script(RECORD_CSP_VIOLATIONS)
    tab = context.new_page()
    problems: list[str] = []
    tab.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
           if m.type in ("error", "warning") else None)  # fmt: skip
    tab.on("pageerror", lambda error: problems.append(f"uncaught: {error}"))
    tab.goto("/login")
    tab.locator("#email").fill(user.email)
    tab.locator("#password").fill(PASSWORD)
    tab.locator("form.form button[type=submit]").click()
    expect(tab.locator("form[action='/logout'] button")).to_be_visible()
    yield tab
    violations = tab.evaluate("window.__cspViolations")
    context.close()
    assert problems == [] and violations == []


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True)


def figure(page: Page, queue: str, field: str) -> Any:
    return page.locator(FIGURE.format(queue=queue, field=field))


def test_the_overview_follows_a_worker_draining_the_queue_without_reloading(
    page: Page, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    enqueue_many(conn, [JobRequest("record_run", {"pause": 0.05}) for _ in range(400)])
    page.goto("/queues/")
    expect(figure(page, "default", "available")).to_have_text("400")
    page.evaluate("window.__sameDocument = true")
    start_worker(workers, database_url, "--queues", "default=2")
    page.wait_for_function(
        "selector => { const n = Number(document.querySelector(selector).textContent"
        ".replace(/,/g, '')); return n > 0 && n < 400; }",
        arg=FIGURE.format(queue="default", field="available"),
        timeout=30_000,
    )
    screenshot(page, "console-overview-draining")
    expect(figure(page, "default", "available")).to_have_text("0", timeout=40_000)
    expect(figure(page, "default", "succeeded_60m")).to_have_text("400", timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True  # updated in place, never reloaded
    expect(page.locator("[data-live-status]")).to_contain_text("updated")
    screenshot(page, "console-overview")


def test_pausing_a_queue_stops_its_claims_until_it_is_resumed(
    page: Page, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    enqueue(conn, "record_run", queue="default")
    start_worker(workers, database_url, "--queues", "default=1,mail=1")
    page.goto("/queues/default")
    page.get_by_role("button", name="Pause queue").click()
    question = page.get_by_role("dialog", name="Pause queue default?")
    expect(question).to_be_visible()  # asked by our bundled script, no inline script
    question.get_by_role("button", name="Back").click()
    expect(question).to_be_hidden()
    assert not scalar(conn, "SELECT paused FROM queues WHERE name = 'default'")
    page.get_by_role("button", name="Pause queue").click()
    question.get_by_role("button", name="Pause queue").click()
    expect(page.get_by_role("status")).to_contain_text("Queue default paused")
    paused = enqueue_many(conn, [JobRequest("record_run", queue="default") for _ in range(10)])
    control = enqueue_many(conn, [JobRequest("record_run", queue="mail") for _ in range(10)])
    wait_until(lambda: all(job_row(conn, job)["state"] == "succeeded" for job in control))
    assert {(job_row(conn, job)["state"], job_row(conn, job)["attempt"]) for job in paused} == {
        ("available", 0)
    }
    page.reload()
    expect(page.locator("[data-totals] [data-field='available']")).to_have_text("10")
    screenshot(page, "console-queue-paused")
    page.get_by_role("button", name="Resume queue").click()
    expect(page.get_by_role("status")).to_contain_text("Queue default resumed.")
    wait_until(lambda: all(job_row(conn, job)["state"] == "succeeded" for job in paused))


def test_a_dead_job_is_requeued_in_one_click_and_succeeds(
    page: Page, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job = enqueue(conn, "flaky", {"failures": 1}, max_attempts=1)
    start_worker(workers, database_url, "--queues", "default=1")
    wait_until(lambda: job_row(conn, job)["state"] == "dead")
    page.goto("/failures/")
    expect(page.locator("table.failures tbody tr")).to_have_count(1)
    screenshot(page, "console-failures")
    page.get_by_role("link", name="flaky").click()
    page.get_by_role("link", name=f"#{job}").click()
    expect(page.locator("[data-state]")).to_have_text("dead")
    expect(page.locator("[data-why]")).to_contain_text("attempt 1 of 1 failed")
    page.get_by_text("Traceback", exact=True).click()
    expect(page.locator("pre.traceback")).to_contain_text("ConnectionError: attempt 1 failed")
    screenshot(page, "console-dead-job")
    page.get_by_role("button", name="Requeue").click()
    expect(page.get_by_role("status")).to_contain_text(f"Job {job} requeued")
    expect(page.locator("[data-state]")).to_have_text("succeeded", timeout=20_000)
    expect(page.locator("table.attempts tbody tr")).to_have_count(2)
    assert job_row(conn, job)["attempt"] == 2
    screenshot(page, "console-requeued-job")


def test_a_scheduled_job_is_run_now_from_the_scheduled_page(
    page: Page, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    job = enqueue(conn, "record_run", delay=3600)
    start_worker(workers, database_url, "--queues", "default=1")
    page.goto("/scheduled/")
    row = page.locator(f"tr[data-job='{job}']")
    expect(row).to_contain_text("scheduled")
    screenshot(page, "console-scheduled")
    row.get_by_role("button", name="Run now").click()
    expect(page.get_by_role("status")).to_contain_text(f"Job {job} will run")
    expect(page).to_have_url("/scheduled/")
    wait_until(lambda: job_row(conn, job)["state"] == "succeeded")
    assert scalar(conn, "SELECT action FROM audit_log") == "job.run_now"


def test_the_charts_are_drawn_from_the_stats(
    page: Page, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    enqueue_many(
        conn,
        [JobRequest("record_run", {"pause": 0.01}) for _ in range(60)]
        + [JobRequest("always_fails", max_attempts=2) for _ in range(5)],
    )
    start_worker(workers, database_url, "--queues", "default=2",
                 "--depth-sample-seconds", "1", "--sweep", "0.2")  # fmt: skip
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM queue_depth_minute") > 0
               and scalar(conn, "SELECT coalesce(sum(dead), 0) FROM job_stats_minute") == 5,
               timeout=30)  # fmt: skip
    page.goto("/queues/default")
    canvases = page.locator("canvas[data-chart]")
    expect(canvases).to_have_count(3)
    for kind in ("throughput", "timing", "depth"):
        canvas = page.locator(f"canvas[data-chart='{kind}']")
        expect(canvas).to_have_attribute("data-drawn-at", DRAWN)
        painted = canvas.evaluate(PAINTED_SERIES)
        assert painted >= 1, f"no series of the {kind} chart left a mark on its canvas"
    screenshot(page, "console-queue-graphs")
    page.goto("/queues/default?window=7d")
    expect(page.locator("canvas[data-chart='depth']")).to_have_attribute("data-drawn-at", DRAWN)


def test_the_cycle_pages_script_still_works_under_the_content_security_policy(
    browser: Browser, server: str, app: Any
) -> None:
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        people = make_employees(session, tenant, 8)
        hr_staff = make_user(session, tenant, Role.HR_STAFF)
        cycle = make_cycle(session, tenant)
    with watched_tab(browser, server, hr_staff) as tab:
        tab.goto(f"/cycles/{cycle.id}/participants")
        toggle = tab.get_by_label("Tick everyone shown")
        expect(
            toggle
        ).to_be_visible()  # the hr bundle (static/hr/participants.js) ran: it unhides the switch
        toggle.check()
        boxes = tab.locator("input[type=checkbox][name=employees]")
        expect(boxes).to_have_count(len(people))
        assert all(box.is_checked() for box in boxes.all())


# What sticks out sideways: the page itself, and every scrolling box wider than its content.
OVERFLOW = """() => {
    const page = document.documentElement;
    const boxes = [...document.querySelectorAll(".scroll")]
        .filter((box) => box.scrollWidth > box.clientWidth)
        .map((box) => `${box.className}: ${box.scrollWidth} > ${box.clientWidth}`);
    return {page: page.scrollWidth - page.clientWidth, boxes};
}"""


def test_the_overview_fits_a_1366_by_768_screen_without_scrolling_sideways(
    browser: Browser, server: str, app: Any, conn: Conn, database_url: str,
    workers: list[WorkerProcess],
) -> None:  # fmt: skip
    with seeding(app) as session:
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
    enqueue_many(
        conn,
        [JobRequest("record_run", {"pause": 0.01}, queue="notifications") for _ in range(300)]
        + [JobRequest("always_fails", queue="default", max_attempts=2) for _ in range(20)]
        + [JobRequest("record_run", queue="reports", delay=3600) for _ in range(1234)],
    )
    start_worker(workers, database_url, "--queues", "default=2,notifications=2")
    finished = "SELECT count(*) FROM jobs WHERE state IN ('succeeded', 'dead')"
    wait_until(lambda: scalar(conn, finished) == 320, timeout=60)
    with watched_tab(browser, server, admin, width=1366, height=768) as tab:
        tab.goto("/queues/")
        workers_header = tab.get_by_role("columnheader", name="Workers")
        expect(workers_header).to_be_in_viewport()
        expect(figure(tab, "reports", "state")).to_have_text("no live worker")
        screenshot(tab, "console-overview-1366")
        assert tab.evaluate(OVERFLOW) == {"page": 0, "boxes": []}
        box = workers_header.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1366
