"""The HR pages in a real browser (Debian's Chromium driven by Playwright), against the app
served on a loopback port, real worker.py processes and a real SMTP server: pages that follow
background work by themselves, with our bundled script and no inline one. Every page must load
without a console error or a Content-Security-Policy violation (``watched_tab``).
"""

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from playwright.sync_api import Browser, Page, expect

from hr.demo import demo_people
from models.people import Role
from tests import test_console_browser as console
from tests.support.db import scalar
from tests.support.factories import make_cycle, make_employees, make_tenant, make_user, seeding
from tests.support.processes import WorkerProcess, start_worker, wait_until
from tests.support.smtp import SmtpServer
from tests.test_console_browser import screenshot, watched_tab

# The console's browser fixtures (a Chromium per module, the app on a loopback port), shared;
# skipped as the console's tests are when Chromium is missing.
browser = console.browser
server = console.server
pytestmark = console.pytestmark
Conn = psycopg.Connection[Any]


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    sink = SmtpServer().start()
    yield sink
    sink.stop()


def test_the_cycle_page_follows_the_deliveries_without_reloading(
    browser: Browser, server: str, app: Any, database_url: str, workers: list[WorkerProcess],
    smtp: SmtpServer,
) -> None:  # fmt: skip
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        people = make_employees(session, tenant, 5)
        admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, people, activate_as=admin)
    with watched_tab(browser, server, admin) as tab:
        tab.goto(f"/cycles/{cycle.id}")
        badges = tab.locator("td.delivery .badge")
        expect(badges).to_have_count(5)
        expect(tab.locator("td.delivery .badge-queued")).to_have_count(5)
        tab.evaluate("window.__sameDocument = true")
        start_worker(workers, database_url, "--queues", "notifications=2", "--poll", "0.1",
                     tasks="hr.tasks", env=smtp.env)  # fmt: skip
        expect(tab.locator("td.delivery .badge-delivered")).to_have_count(5, timeout=30_000)
        expect(tab.locator("[data-refresh-status]")).to_contain_text("up to date", timeout=10_000)
        assert tab.evaluate("window.__sameDocument") is True  # updated in place, never reloaded
        assert len(smtp.messages) == 5


GOOD_ROWS = 4950
EXISTING = 200  # the first 200 of the file are employees already; the last 50 of them move


def employee_file(path: Path) -> tuple[Path, list[tuple[int, str]]]:
    """5,000 rows: the demo organisation of 4,950 people (those of `make_employees(..., 200)`
    first) with 50 bad rows among them; returns the file and each bad row's (line, reason)."""
    good = demo_people(GOOD_ROWS, "acme.example")
    bad: list[tuple[str, str]] = []
    for k in range(7):
        bad += [
            (f"Bad {k},not-an-address-{k},Sales,",
             f"'not-an-address-{k}' is not a valid e-mail address: An email address must have"
             " an @-sign."),
            (f",noname{k}@acme.example,Sales,", "the name is empty"),
            (f"Nodept {k},nodept{k}@acme.example,,", "the department is empty"),
            (f"Orphan {k},orphan{k}@acme.example,Sales,ghost{k}@acme.example",
             f"the manager ghost{k}@acme.example is neither an employee nor in the file"),
            (f"Self {k},self{k}@acme.example,Sales,self{k}@acme.example",
             "an employee cannot be their own manager"),
            (f"Dup {k},{good[10 * k].email},Sales,", f"{good[10 * k].email} is on line"),
        ]  # fmt: skip
    bad += [(f"Short {k},short{k}@acme.example,Sales", "the line has 3 fields; the header has 4")
            for k in range(4)]  # fmt: skip
    for k in range(2):
        loop = f"the manager chain would loop: loopa{k}@acme.example -> loopb{k}@acme.example"
        bad += [
            (f"Loop A{k},loopa{k}@acme.example,Sales,loopb{k}@acme.example", loop),
            (f"Loop B{k},loopb{k}@acme.example,Sales,loopa{k}@acme.example", loop),
        ]
    assert len(bad) == 50
    rows: list[tuple[str, str | None]] = []
    for index, person in enumerate(good):
        manager = good[person.manager].email if person.manager is not None else ""
        department = "Finance" if EXISTING - 50 <= index < EXISTING else person.department
        rows.append((f"{person.name},{person.email},{department},{manager}", None))
        if index % 90 == 89 and bad:
            rows.append(bad.pop(0))
    lines = ["name,email,department,manager_email", *(text for text, _ in rows)]
    path.write_text("\n".join(lines) + "\n")
    refused = [(line, reason) for line, (_, reason) in enumerate(rows, start=2) if reason]
    return path, refused


@pytest.fixture
def upload_times(app: Any) -> list[float]:
    """Seconds the app took to answer each POST /people/imports/, the body read included."""
    times: list[float] = []
    inner = app.wsgi_app

    def timed(environ: dict[str, Any], start_response: Any) -> Any:
        began = time.perf_counter()
        environ["t.began"] = began
        answer = inner(environ, start_response)  # the view has run: what is left is the body
        if environ["REQUEST_METHOD"] == "POST" and environ["PATH_INFO"] == "/people/imports/":
            times.append(time.perf_counter() - began)
        return answer

    app.wsgi_app = timed
    return times


def report(tab: Page, kind: str) -> list[list[str]]:
    return tab.locator(f"table[data-report='{kind}'] tbody tr").evaluate_all(
        "rows => rows.map(row => [...row.cells].map(cell => cell.textContent))"
    )


def upload(tab: Page, path: Path) -> float:
    """Send the file through the page; returns the browser's wait for the answer, in ms."""
    tab.goto("/people/imports/")
    tab.get_by_label("CSV file").set_input_files(path)
    with tab.expect_response(lambda r: r.request.method == "POST") as posted:
        tab.get_by_role("button", name="Import").click()
    timing = posted.value.request.timing
    expect(tab.get_by_role("heading", name=re.compile(r"^Import #\d+"))).to_be_visible()
    return float(timing["responseStart"] - timing["requestStart"])


def test_five_thousand_employees_are_imported_in_the_background_with_a_report(
    browser: Browser, server: str, app: Any, conn: Conn, database_url: str,
    workers: list[WorkerProcess], upload_times: list[float], tmp_path: Path,
) -> None:  # fmt: skip
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        make_employees(session, tenant, EXISTING)
        admin = make_user(session, tenant, Role.HR_ADMIN)
    path, refused = employee_file(tmp_path / "people.csv")
    last = demo_people(GOOD_ROWS, "acme.example")[-1]  # in the last batch the job applies

    with watched_tab(browser, server, admin) as tab:
        waited = upload(tab, path)
        print(f"\nPOST /people/imports/ with 5,000 rows: app {upload_times[0] * 1000:.0f} ms,"
              f" browser {waited:.0f} ms")  # fmt: skip
        assert upload_times[0] < 0.2
        bar = tab.locator("progress[aria-label='Rows processed']")
        expect(bar).to_have_attribute("value", "0")  # queued: no worker yet
        expect(bar).to_have_attribute("max", "5000")
        tab.evaluate("window.__sameDocument = true")

        with psycopg.connect(database_url) as blocker:  # holds the last batch back
            blocker.execute(
                "INSERT INTO employees (tenant_id, name, email, department)"
                " VALUES (%s, 'Held', %s, 'Sales')",
                (tenant.id, last.email),
            )
            start_worker(workers, database_url, "--queues", "default=1", "--poll", "0.1",
                         tasks="hr.tasks")  # fmt: skip
            wait_until(
                lambda: (
                    scalar(
                        conn,
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock' AND query LIKE '%%INSERT INTO employees%%'",
                    )
                    == 1
                ),
                message="the import never reached its last batch",
            )
            expect(bar).to_have_attribute("value", "4500")  # nine batches of 500 done
            screenshot(tab, "import-progress")
            blocker.rollback()
        started = time.monotonic()
        expect(tab.locator("table[data-report='refused'] tbody tr")).to_have_count(50)
        print(f"import of 5,000 rows done {time.monotonic() - started:.1f} s after the release")
        assert tab.evaluate("window.__sameDocument") is True  # followed in place, not reloaded
        shown = report(tab, "refused")
        assert [int(line) for line, *_ in shown] == [line for line, _ in refused]
        for (_, _, _, why), (_, expected) in zip(shown, refused, strict=True):
            assert why.startswith(expected), (why, expected)
        counts = {kind: tab.locator(f"[data-count='{kind}']").text_content()
                  for kind in ("created", "updated", "unchanged", "refused")}  # fmt: skip
        assert counts == {"created": "4,750", "updated": "50", "unchanged": "150", "refused": "50"}
        tab.screenshot(path=console.ARTIFACTS / "import-report.png")  # the top: docs/screenshots
        assert scalar(conn, "SELECT count(*) FROM employees") == GOOD_ROWS

        versions = (
            "SELECT string_agg(id || ':' || xmin || ':' || ctid, ',' ORDER BY id) FROM employees"
        )
        before = scalar(conn, versions)
        upload(tab, path)
        expect(tab.locator("table[data-report='refused'] tbody tr")).to_have_count(50)
        counts = {kind: tab.locator(f"[data-count='{kind}']").text_content()
                  for kind in ("created", "updated", "unchanged", "refused")}  # fmt: skip
        assert counts == {"created": "0", "updated": "0", "unchanged": "4,950", "refused": "50"}
        assert scalar(conn, versions) == before  # the second run wrote no employee row
        print(f"second POST: app {upload_times[1] * 1000:.0f} ms")
        assert upload_times[1] < 0.2
