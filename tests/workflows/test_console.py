"""The workflows console through the test client: who sees which executions, the step timeline,
approve / cancel / resume as POSTs with CSRF, refused with a sentence, audited."""

from pathlib import Path
from typing import Any

import psycopg
import pytest

from models.people import Role
from tests.support.db import scalar
from tests.support.factories import csrf_token, login_as, make_tenant, make_user, seeding
from tests.workflows.conftest import Slices
from workflows import start_workflow
from workflows.store import all_queries

Conn = psycopg.Connection[Any]


@pytest.fixture
def people(app: Any, wf_conn: Conn) -> dict[str, Any]:
    with seeding(app) as session:
        acme, globex = make_tenant(session, "acme"), make_tenant(session, "globex")
        return {
            "acme": acme.id,
            "globex": globex.id,
            "admin": make_user(session, acme, Role.PLATFORM_ADMIN),
            "acme_hr": make_user(session, acme, Role.HR_ADMIN),
            "globex_hr": make_user(session, globex, Role.HR_ADMIN),
            "employee": make_user(session, acme, Role.EMPLOYEE),
        }


def client_for(app: Any, user: Any) -> Any:
    client = app.test_client()
    login_as(client, user)
    return client


def post(client: Any, path: str, data: dict[str, Any] | None = None) -> Any:
    token = csrf_token(client, "/workflows/")
    return client.post(path, data={**(data or {}), "csrf_token": token})


def followed(client: Any, response: Any) -> str:
    assert response.status_code == 303, response.get_data(as_text=True)
    return str(client.get(response.headers["Location"]).get_data(as_text=True))


def audit(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT action, target_type, target_id, tenant_id, details FROM audit_log ORDER BY id"
    ).fetchall()


def waiting_approval(
    conn: Conn, slices: Slices, tenant_id: int, timeout: float | None = None
) -> int:
    eid = start_workflow(conn, "approval", {"timeout": timeout}, tenant_id=tenant_id).execution_id
    slices.run_visible()
    return eid


def test_each_hr_admin_lists_only_their_tenants_executions(
    app: Any, wf_conn: Conn, slices: Slices, people: dict[str, Any]
) -> None:
    acme = waiting_approval(wf_conn, slices, people["acme"])
    globex = waiting_approval(wf_conn, slices, people["globex"])
    page = client_for(app, people["acme_hr"]).get("/workflows/").get_data(as_text=True)
    assert f'data-execution="{acme}"' in page and f'data-execution="{globex}"' not in page
    admin = client_for(app, people["admin"])
    page = admin.get("/workflows/?status=waiting&waiting_on=approval").get_data(as_text=True)
    assert f'data-execution="{acme}"' in page and f'data-execution="{globex}"' in page
    assert "Oldest waiting" in page
    page = admin.get("/workflows/?status=succeeded").get_data(as_text=True)
    assert "No execution matches." in page
    assert client_for(app, people["globex_hr"]).get(f"/workflows/{acme}").status_code == 404
    overview = admin.get("/queues/").get_data(as_text=True)
    assert "<strong>2</strong> waiting" in overview and "Oldest waiting:" in overview
    overview = client_for(app, people["acme_hr"]).get("/queues/").get_data(as_text=True)
    assert "<strong>1</strong> waiting" in overview
    assert client_for(app, people["employee"]).get("/workflows/").status_code == 403


def test_an_approval_is_delivered_once_audited_and_refused_after(
    app: Any, wf_conn: Conn, slices: Slices, people: dict[str, Any]
) -> None:
    eid = waiting_approval(wf_conn, slices, people["acme"])
    hr = client_for(app, people["acme_hr"])
    page = hr.get(f"/workflows/{eid}").get_data(as_text=True)
    assert "data-approve" in page and "For the event “approval”" in page
    assert hr.post(f"/workflows/{eid}/event", data={"key": "approval"}).status_code == 400
    response = post(
        hr, f"/workflows/{eid}/event", {"key": "approval", "payload": '{"approved": true}'}
    )
    assert "Event “approval” delivered" in followed(hr, response)
    again = post(
        hr, f"/workflows/{eid}/event", {"key": "approval", "payload": '{"approved": false}'}
    )
    assert "already decided by" in followed(hr, again)
    other = client_for(app, people["globex_hr"])
    refused = post(other, f"/workflows/{eid}/event", {"key": "approval", "payload": "{}"})
    assert refused.status_code == 303
    assert audit(wf_conn) == [
        ("workflow.event", "workflow_execution", str(eid), people["acme"],
         {"key": "approval", "payload": {"approved": True}}),
    ]  # fmt: skip
    decided = wf_conn.execute("SELECT decided_by, payload FROM workflow_waits").fetchone()
    assert decided == (people["acme_hr"].email, {"approved": True})
    slices.run_visible()
    page = hr.get(f"/workflows/{eid}").get_data(as_text=True)
    assert 'data-status="succeeded"' in page


def test_a_bad_payload_is_refused_with_a_sentence_and_changes_nothing(
    app: Any, wf_conn: Conn, slices: Slices, people: dict[str, Any]
) -> None:
    eid = waiting_approval(wf_conn, slices, people["acme"])
    hr = client_for(app, people["acme_hr"])
    response = post(hr, f"/workflows/{eid}/event", {"key": "approval", "payload": "{nope"})
    assert "The payload is not JSON" in followed(hr, response)
    assert scalar(wf_conn, "SELECT satisfied_at FROM workflow_waits") is None
    assert audit(wf_conn) == []


def test_cancel_and_resume_from_the_console_are_audited(
    app: Any, wf_conn: Conn, slices: Slices, people: dict[str, Any], tmp_path: Path
) -> None:
    admin = client_for(app, people["admin"])
    waiting = waiting_approval(wf_conn, slices, people["acme"])
    assert "is cancelled; it stops now" in followed(
        admin, post(admin, f"/workflows/{waiting}/cancel")
    )
    assert "is already cancelled" in followed(admin, post(admin, f"/workflows/{waiting}/cancel"))
    flag = tmp_path / "flag"
    failed = start_workflow(wf_conn, "fixable", {"flag": str(flag)}, tenant_id=people["acme"])
    slices.run_visible()
    page = admin.get(f"/workflows/{failed.execution_id}").get_data(as_text=True)
    assert "the flag file" in page and "Resume from the failed step" in page
    flag.touch()
    response = post(admin, f"/workflows/{failed.execution_id}/resume")
    assert "resumes from its failed step" in followed(admin, response)
    slices.run_visible()
    assert scalar(wf_conn, "SELECT status FROM workflow_executions WHERE id = %s",
                  failed.execution_id) == "succeeded"  # fmt: skip
    actions = [(row[0], row[2], row[4]) for row in audit(wf_conn)]
    assert actions[0] == ("workflow.cancel", str(waiting), {"was": "waiting"})
    assert actions[1][0:2] == ("workflow.resume", str(failed.execution_id))
    assert actions[1][2]["step"] == "needs-flag"
    assert len(actions) == 2


def test_a_code_change_under_a_waiting_execution_shows_in_the_console(
    app: Any, wf_conn: Conn, slices: Slices, people: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    eid = start_workflow(wf_conn, "versioned", {}, tenant_id=people["acme"]).execution_id
    slices.run_visible()
    monkeypatch.setenv("WF_VARIANT", "2")
    admin = client_for(app, people["admin"])
    post(admin, f"/workflows/{eid}/event", {"key": "go", "payload": ""})
    slices.run_visible()
    page = admin.get(f"/workflows/{eid}").get_data(as_text=True)
    assert "workflow code changed at step 1" in page
    assert 'data-status="failed"' in page


def shared_buffers(conn: Conn, query: str, params: dict[str, Any]) -> int:
    """Pages the statement read (EXPLAIN ANALYZE, BUFFERS): a count, not a timing."""
    sql = all_queries()[query].sql
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()
    assert plan is not None
    top = plan[0][0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


def test_ten_thousand_waiting_executions_list_from_indexes(
    app: Any, wf_conn: Conn, people: dict[str, Any]
) -> None:
    """10,000 executions waiting on approval are rows only (no job); the list's first page,
    filtered to them, and the overview's oldest wait read a few pages, not every open wait.
    (The time it takes is measured in bench/workflow_idle.py.)"""
    wf_conn.execute(
        "INSERT INTO workflow_executions (tenant_id, name, status, input)"
        " SELECT %s, 'approval', 'waiting', '{}' FROM generate_series(1, 10000)",
        (people["acme"],),
    )
    wf_conn.execute(
        "INSERT INTO workflow_waits (execution_id, step_id, kind, key, wake_at)"
        " SELECT id, 1, 'event', 'approval', now() + interval '7 days' FROM workflow_executions"
    )
    wf_conn.execute("ANALYZE workflow_executions; ANALYZE workflow_waits")
    assert scalar(wf_conn, "SELECT count(*) FROM jobs") == 0
    admin = client_for(app, people["admin"])
    for path in ("/workflows/", "/workflows/?status=waiting&waiting_on=approval",
                 "/workflows/?tenant=acme&status=waiting&before=5000"):  # fmt: skip
        response = admin.get(path)
        assert response.status_code == 200
        assert response.get_data(as_text=True).count("data-execution=") == 50
    page = {"tenant_id": None, "status": "waiting", "name": None, "waiting_on": "approval",
            "started_from": None, "started_to": None, "before": None, "limit": 51}  # fmt: skip
    # The page: about three pages per row shown (the execution, its tenant, its wait), where
    # reading every open wait and its execution is 30,000.
    assert shared_buffers(wf_conn, "console_execution_list", page) < 1000
    # The overview: the status counts read the executions' heap (176 pages here); the oldest
    # wait is one index entry, where sorting every open wait read 280 more.
    assert shared_buffers(wf_conn, "console_workflow_counts", {"tenant_id": None}) < 300
