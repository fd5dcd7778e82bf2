"""The execution page in a real browser (Chromium driven by Playwright) with a real worker.py:
an HR admin sees the execution waiting on the approval, approves it in one click, and watches
it finish; no console error or Content-Security-Policy violation on the way."""

from typing import Any

import psycopg
from playwright.sync_api import Browser, expect

from models.people import Role
from tests.support.factories import make_tenant, make_user, seeding
from tests.support.processes import WorkerProcess, start_worker, wait_until
from tests.support.workflows import create_workflow_test_tables
from tests.test_console_browser import (  # noqa: F401 - fixtures, and the skip without Chromium
    browser,
    pytestmark,
    screenshot,
    server,
    watched_tab,
)
from workflows import start_workflow

Conn = psycopg.Connection[Any]


def test_an_hr_admin_approves_a_waiting_execution_from_its_page(
    browser: Browser,  # noqa: F811 - the imported fixture
    server: str,  # noqa: F811 - the imported fixture
    app: Any,
    conn: Conn,
    database_url: str,
    workers: list[WorkerProcess],
) -> None:
    create_workflow_test_tables(conn)
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        hr = make_user(session, tenant, Role.HR_ADMIN)
        tenant_id = tenant.id
    eid = start_workflow(conn, "approval", {"timeout": 3600}, tenant_id=tenant_id).execution_id
    start_worker(workers, database_url, "--single", "--queues", "workflows=1", "--poll", "0.1",
                 tasks="tests.support.workflows")  # fmt: skip
    status = "SELECT status FROM workflow_executions WHERE id = %s"
    wait_until(lambda: conn.execute(status, (eid,)).fetchone() == ("waiting",))
    with watched_tab(browser, server, hr) as page:
        page.goto("/workflows/")
        page.get_by_role("link", name=f"#{eid}").first.click()
        expect(page.locator("[data-status]")).to_have_text("waiting")
        expect(page.locator("[data-open-wait]")).to_contain_text("For the event “approval”")
        screenshot(page, "workflow-execution-waiting")
        page.get_by_role("button", name="Approve").click()
        expect(page.get_by_role("status")).to_contain_text("Event “approval” delivered")
        wait_until(lambda: conn.execute(status, (eid,)).fetchone() == ("succeeded",))
        page.reload()
        expect(page.locator("[data-status]")).to_have_text("succeeded")
        expect(page.locator("[data-waits]")).to_contain_text(hr.email)
        expect(page.locator("[data-steps] tr[data-step]")).to_have_count(3)
        screenshot(page, "workflow-execution-approved")
