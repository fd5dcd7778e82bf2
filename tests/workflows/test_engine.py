"""The workflow engine on a real PostgreSQL, slices run in this process (see conftest.py):
checkpoints and replay, exactly-once transaction steps, code changes, events and their refusals,
cancel and resume."""

from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.support.db import scalar
from tests.workflows.conftest import Slices
from workflows import (
    ActionRefused,
    EventRefused,
    StartError,
    cancel_execution,
    resume_execution,
    send_event,
    start_workflow,
)

Conn = psycopg.Connection[Any]


def execution(conn: Conn, execution_id: int) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cursor:
        row = cursor.execute(
            "SELECT * FROM workflow_executions WHERE id = %s", (execution_id,)
        ).fetchone()
    assert row is not None
    return row


def steps(conn: Conn, execution_id: int) -> list[tuple[int, str, str]]:
    rows = conn.execute(
        "SELECT step_id, name, kind FROM operation_outputs WHERE execution_id = %s"
        " ORDER BY step_id",
        (execution_id,),
    ).fetchall()
    return [(row[0], row[1], row[2]) for row in rows]


def live_jobs(conn: Conn, execution_id: int) -> list[tuple[str, bool]]:
    rows = conn.execute(
        "SELECT state, available_at <= now() FROM jobs WHERE unique_key = %s"
        " AND state IN ('available', 'running')",
        (f"workflow:{execution_id}",),
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def ledger_rows(conn: Conn, execution_id: int) -> list[int]:
    rows = conn.execute(
        "SELECT step FROM wf_ledger WHERE execution_id = %s ORDER BY step", (execution_id,)
    ).fetchall()
    return [row[0] for row in rows]


def test_a_workflow_runs_its_steps_once_and_records_each(
    wf_conn: Conn, slices: Slices, effects_file: Path
) -> None:
    started = start_workflow(wf_conn, "five_steps", {"n": 7})
    assert started.created
    assert slices.run_visible() == 1
    row = execution(wf_conn, started.execution_id)
    assert row["status"] == "succeeded", row["error"]
    assert row["output"] == {"n": 7, "steps": [10, "2", 30, "4", 50]}
    assert row["finished_at"] is not None
    assert steps(wf_conn, started.execution_id) == [
        (0, "ledger-1", "transaction"),
        (1, "effect-2", "step"),
        (2, "ledger-3", "transaction"),
        (3, "effect-4", "step"),
        (4, "ledger-5", "transaction"),
    ]
    assert ledger_rows(wf_conn, started.execution_id) == [1, 3, 5]
    eid = started.execution_id
    assert effects_file.read_text().split() == [f"{eid}:2", f"{eid}:4"]
    assert live_jobs(wf_conn, eid) == []


def test_a_replay_returns_recorded_outputs_without_running_the_steps_again(
    wf_conn: Conn, slices: Slices, effects_file: Path
) -> None:
    eid = start_workflow(wf_conn, "five_steps", {"n": 1}).execution_id
    slices.run_visible()
    first = execution(wf_conn, eid)["output"]
    # Replay the finished execution as if its last slice had died before marking it finished.
    wf_conn.execute(
        "UPDATE workflow_executions SET status = 'running', output = NULL, finished_at = NULL"
        " WHERE id = %s",
        (eid,),
    )
    wf_conn.execute(
        "INSERT INTO jobs (tenant_id, queue, task, payload, unique_key)"
        " SELECT tenant_id, 'workflows', 'workflow.run', jsonb_build_object('execution_id', id),"
        " 'workflow:' || id FROM workflow_executions WHERE id = %s",
        (eid,),
    )
    assert slices.run_visible() == 1
    assert execution(wf_conn, eid)["output"] == first
    assert ledger_rows(wf_conn, eid) == [1, 3, 5]  # the PK would have failed a second insert
    assert len(effects_file.read_text().split()) == 2


def test_a_transaction_step_that_loses_its_checkpoint_keeps_no_effect_of_its_own(
    wf_conn: Conn, slices: Slices
) -> None:
    """Another writer records the step while it runs: the stored output wins, and the step's
    own ledger row is rolled back with its checkpoint."""
    eid = start_workflow(wf_conn, "raced", {}).execution_id
    slices.run_visible()
    row = execution(wf_conn, eid)
    assert row["status"] == "succeeded", row["error"]
    assert row["output"] == -1
    assert ledger_rows(wf_conn, eid) == [2]


def test_starting_twice_with_one_key_returns_the_first_execution(wf_conn: Conn) -> None:
    first = start_workflow(wf_conn, "approval", {"timeout": None}, idempotency_key="cycle-1")
    second = start_workflow(wf_conn, "approval", {"timeout": None}, idempotency_key="cycle-1")
    assert first.created and not second.created
    assert second.execution_id == first.execution_id
    assert scalar(wf_conn, "SELECT count(*) FROM workflow_executions") == 1
    assert scalar(wf_conn, "SELECT count(*) FROM jobs WHERE queue = 'workflows'") == 1
    with pytest.raises(StartError, match="with another input"):
        start_workflow(wf_conn, "approval", {"timeout": 5}, idempotency_key="cycle-1")


def test_a_start_rolled_back_with_the_callers_transaction_leaves_nothing(wf_conn: Conn) -> None:
    with pytest.raises(RuntimeError), wf_conn.transaction():
        start_workflow(wf_conn, "approval", {})
        raise RuntimeError("the caller's work failed")
    assert scalar(wf_conn, "SELECT count(*) FROM workflow_executions") == 0
    assert scalar(wf_conn, "SELECT count(*) FROM jobs") == 0


def test_an_event_wait_parks_with_no_job_and_an_event_resumes_it_once(
    wf_conn: Conn, slices: Slices
) -> None:
    eid = start_workflow(wf_conn, "approval", {"timeout": None}).execution_id
    slices.run_visible()
    assert execution(wf_conn, eid)["status"] == "waiting"
    assert live_jobs(wf_conn, eid) == []  # nothing runs or polls for it
    send_event(wf_conn, eid, "approval", {"ok": True}, decided_by="hr@example.com")
    assert live_jobs(wf_conn, eid) == [("available", True)]
    with pytest.raises(EventRefused, match=r"already decided by hr@example\.com"):
        send_event(wf_conn, eid, "approval", {"ok": False}, decided_by="other@example.com")
    slices.run_visible()
    row = execution(wf_conn, eid)
    assert row["status"] == "succeeded"
    assert row["output"] == {"payload": {"ok": True}, "by": "hr@example.com"}
    assert ledger_rows(wf_conn, eid) == [1, 2]
    with pytest.raises(EventRefused, match="is succeeded: it waits for nothing"):
        send_event(wf_conn, eid, "approval", {"ok": True})


def test_an_event_after_the_timeout_is_refused_and_changes_nothing(
    wf_conn: Conn, slices: Slices
) -> None:
    eid = start_workflow(wf_conn, "approval", {"timeout": 0.2}).execution_id
    slices.run_visible()
    assert live_jobs(wf_conn, eid) == [("available", False)]  # the timeout's slice, scheduled
    wf_conn.execute("SELECT pg_sleep(0.3)")
    with pytest.raises(EventRefused, match=r"timed out at .*late event changes nothing"):
        send_event(wf_conn, eid, "approval", {"ok": True})
    wait = wf_conn.execute(
        "SELECT satisfied_at, payload FROM workflow_waits WHERE execution_id = %s", (eid,)
    ).fetchone()
    assert wait == (None, None)
    slices.run_visible()
    assert execution(wf_conn, eid)["output"] == {"timed_out": True}
    outcome = scalar(wf_conn, "SELECT outcome FROM workflow_waits WHERE execution_id = %s", eid)
    assert outcome == "timeout"
    with pytest.raises(EventRefused):
        send_event(wf_conn, eid, "approval", {"ok": True})


def test_an_event_for_another_tenants_execution_is_refused(wf_conn: Conn, slices: Slices) -> None:
    other = scalar(wf_conn, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id")
    eid = start_workflow(wf_conn, "approval", {}).execution_id
    slices.run_visible()
    with pytest.raises(EventRefused, match=f"no workflow execution {eid} in your tenant"):
        send_event(wf_conn, eid, "approval", {"ok": True}, tenant_id=other)
    assert scalar(wf_conn, "SELECT satisfied_at FROM workflow_waits") is None
    with pytest.raises(EventRefused, match="is not waiting for 'other'"):
        send_event(wf_conn, eid, "other", {})


def test_a_changed_step_sequence_fails_the_execution_on_resume(
    wf_conn: Conn, slices: Slices, monkeypatch: pytest.MonkeyPatch
) -> None:
    eid = start_workflow(wf_conn, "versioned", {}).execution_id
    slices.run_visible()
    assert execution(wf_conn, eid)["status"] == "waiting"
    monkeypatch.setenv("WF_VARIANT", "2")  # a deploy changed the code under the execution
    send_event(wf_conn, eid, "go", None)
    slices.run_visible()
    row = execution(wf_conn, eid)
    assert row["status"] == "failed"
    assert row["error"] == (
        "CodeChanged: workflow code changed at step 1: the execution waits there for the event "
        "'go', the code now calls transaction 'inserted'"
    )
    assert ledger_rows(wf_conn, eid) == [1]  # the inserted step never ran


def test_cancel_stops_a_waiting_execution_at_once(wf_conn: Conn, slices: Slices) -> None:
    eid = start_workflow(wf_conn, "approval", {"timeout": 60}).execution_id
    slices.run_visible()
    assert cancel_execution(wf_conn, eid) == "waiting"
    row = execution(wf_conn, eid)
    assert row["status"] == "cancelled" and row["finished_at"] is not None
    assert live_jobs(wf_conn, eid) == []
    assert scalar(wf_conn, "SELECT outcome FROM workflow_waits") == "cancelled"
    with pytest.raises(ActionRefused, match="already cancelled"):
        cancel_execution(wf_conn, eid)
    with pytest.raises(ActionRefused, match=f"only a failed .*; execution {eid} is cancelled"):
        resume_execution(wf_conn, eid)
    with pytest.raises(EventRefused, match="cancelled: it waits for nothing"):
        send_event(wf_conn, eid, "approval", {})


def test_a_failed_step_fails_the_execution_and_resume_runs_it_again(
    wf_conn: Conn, slices: Slices, tmp_path: Path
) -> None:
    flag = tmp_path / "flag"
    eid = start_workflow(wf_conn, "fixable", {"flag": str(flag)}).execution_id
    slices.run_visible()
    row = execution(wf_conn, eid)
    assert row["status"] == "failed"
    assert "step 1 ('needs-flag') failed: PermanentError: the flag file" in row["error"]
    attempts = scalar(wf_conn, "SELECT attempts FROM operation_outputs WHERE step_id = 1")
    assert attempts == 1  # a PermanentError is not retried
    flag.touch()  # the fix
    forgotten = resume_execution(wf_conn, eid)
    assert forgotten is not None and forgotten["name"] == "needs-flag"
    slices.run_visible()
    row = execution(wf_conn, eid)
    assert row["status"] == "succeeded", row["error"]
    assert ledger_rows(wf_conn, eid) == [1, 2]  # step 0 replayed, not run again
