"""An external step's checkpoint is held back to the slice's next boundary (a transaction
step's, a wait's, the end's) so that they commit together, but never past the start of the next
external step: a kill repeats at most the one step in flight. A held checkpoint that finds its
step recorded by another writer fails the slice's job, whose retry replays the stored result."""

from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobqueue.execution import run_job
from jobqueue.registry import registry as tasks
from jobqueue.store import JobStore
from tests.support.processes import wait_until
from tests.workflows.conftest import WORKER, Slices
from workflows import QUEUE, start_workflow
from workflows.runtime import Slice
from workflows.store import Fence, WorkflowStore

Conn = psycopg.Connection[Any]


def execution(conn: Conn, execution_id: int) -> dict[str, Any]:
    with conn.cursor(row_factory=dict_row) as cursor:
        row = cursor.execute(
            "SELECT status, output, error FROM workflow_executions WHERE id = %s",
            (execution_id,),
        ).fetchone()
    assert row is not None
    return row


def test_an_external_steps_checkpoint_is_committed_before_the_next_external_step_runs(
    wf_conn: Conn, slices: Slices
) -> None:
    eid = start_workflow(wf_conn, "held_checkpoint", {}).execution_id
    assert slices.run_visible() == 1
    row = execution(wf_conn, eid)
    assert row["status"] == "succeeded", row["error"]
    assert row["output"] == [0]  # step 0 was committed when step 1 ran
    recorded = wf_conn.execute(
        "SELECT step_id, name FROM operation_outputs WHERE execution_id = %s ORDER BY 1", (eid,)
    ).fetchall()
    assert recorded == [(0, "first"), (1, "probe")]  # the last one went with the end


def test_a_held_checkpoint_taken_by_another_writer_fails_the_slice_and_the_retry_replays_it(
    wf_conn: Conn, database_url: str
) -> None:
    eid = start_workflow(wf_conn, "stolen", {}).execution_id
    store = JobStore(wf_conn)

    def attempt() -> str:
        claimed = wait_until(lambda: store.claim(QUEUE, 1, WORKER, 30.0), timeout=10)
        result = run_job(claimed[0], tasks, WORKER, lambda: psycopg.connect(database_url))
        store.finish([result], WORKER)
        return f"{result.outcome}: {result.error}"

    first = attempt()
    assert first.startswith("failed: HeldCheckpointTaken: ")
    assert "step 0 was recorded by another writer" in first
    # Nothing of the slice committed: the execution did not end with the step's own result.
    assert execution(wf_conn, eid) == {"status": "pending", "output": None, "error": None}
    assert attempt() == "succeeded: None"
    row = execution(wf_conn, eid)
    assert (row["status"], row["output"]) == ("succeeded", "stored")


def test_relaxed_durability_is_opt_in_per_workflow_and_reset_after_its_slice(
    wf_conn: Conn, database_url: str
) -> None:
    """A workflow registered with relaxed_durability=True runs its slice with synchronous_commit
    off; the connection (pooled in a worker) is reset after it, and other workflows keep the
    server's setting."""
    relaxed = start_workflow(wf_conn, "relaxed_probe", {}).execution_id
    durable = start_workflow(wf_conn, "durable_probe", {}).execution_id
    store = JobStore(wf_conn)
    with psycopg.connect(database_url, autocommit=True) as pooled:  # one connection for both
        for job in sorted(store.claim(QUEUE, 2, WORKER, 30.0), key=lambda job: job.id):
            fence = Fence(job.id, job.attempt, WORKER)
            Slice(WorkflowStore(pooled), job.payload["execution_id"], fence).run()
            setting = pooled.execute("SHOW synchronous_commit").fetchone()
            assert setting == ("on",)  # reset after each slice
    assert execution(wf_conn, relaxed)["output"] == "off"
    assert execution(wf_conn, durable)["output"] == "on"
