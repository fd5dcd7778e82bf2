"""The HR pages in a real browser (Debian's Chromium driven by Playwright), against the app
served on a loopback port, real worker.py processes and a real SMTP server: pages that follow
background work by themselves, with our bundled script and no inline one. Every page must load
without a console error or a Content-Security-Policy violation (``watched_tab``).
"""

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from models.people import Role
from tests import test_console_browser as console
from tests.support.factories import make_cycle, make_employees, make_tenant, make_user, seeding
from tests.support.processes import WorkerProcess, start_worker
from tests.support.smtp import SmtpServer
from tests.test_console_browser import watched_tab

# The console's browser fixtures (a Chromium per module, the app on a loopback port), shared;
# skipped as the console's tests are when Chromium is missing.
browser = console.browser
server = console.server
pytestmark = console.pytestmark


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
