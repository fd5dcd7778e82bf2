"""Slices run in groups (jobqueue.cooperative): a worker thread runs several slices together, and
their loads and step boundaries are one statement each for the group. Every boundary of a group
must still hold as if written alone: fenced by its own slice's claim, refused for an execution no
longer running, and a row the database refuses fails only its own slice."""

import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobqueue.store import ClaimedJob, JobStore
from tests.jobqueue.test_enqueue_plans import nodes
from tests.workflows.conftest import WORKER, Slices
from workflows import QUEUE, cancel_execution, start_workflow
from workflows.store import (
    JSON_ENCODER,
    Boundary,
    Checkpoint,
    End,
    Fence,
    WorkflowStore,
    all_queries,
    guard_boundaries,
)

Conn = psycopg.Connection[Any]


def claim_all(conn: Conn, count: int) -> list[ClaimedJob]:
    claimed = JobStore(conn).claim(QUEUE, count, WORKER, 30.0)
    conn.commit()
    assert len(claimed) == count
    return sorted(claimed, key=lambda job: job.payload["execution_id"])


def checkpoint(step_id: int, kind: str = "step") -> Checkpoint:
    now = time.time()
    return Checkpoint(step_id, f"step-{step_id}", kind, step_id * 10, None, 1, now, now)


def boundaries_of(
    store: WorkflowStore,
    jobs: list[ClaimedJob],
    held: list[Checkpoint],
    ends: list[End | None] | None = None,
) -> list[Boundary]:
    """Each claimed slice's boundary: its held checkpoint and (if given) its end."""
    return [
        Boundary(store, job.payload["execution_id"], Fence(job.id, job.attempt, WORKER), h, end)
        for job, h, end in zip(jobs, held, ends or [None] * len(jobs), strict=True)
    ]


def recorded(conn: Conn) -> dict[int, list[int]]:
    rows = conn.execute(
        "SELECT execution_id, step_id FROM operation_outputs ORDER BY 1, 2"
    ).fetchall()
    found: dict[int, list[int]] = {}
    for execution_id, step_id in rows:
        found.setdefault(execution_id, []).append(step_id)
    return found


def statuses(conn: Conn) -> dict[int, str]:
    return dict(conn.execute("SELECT id, status FROM workflow_executions").fetchall())


def test_a_groups_boundaries_are_fenced_each_by_its_own_slices_claim(
    wf_conn: Conn, database_url: str
) -> None:
    """kills: group-guard-fence-dropped"""
    ids = [start_workflow(wf_conn, "two_noops").execution_id for _ in range(4)]
    wf_conn.commit()
    jobs = claim_all(wf_conn, 4)
    # The third slice's lease was lost (the job was claimed again, by attempt 2 elsewhere); the
    # fourth's execution was cancelled while it ran.
    wf_conn.execute("UPDATE jobs SET attempt = attempt + 1 WHERE id = %s", (jobs[2].id,))
    cancel_execution(wf_conn, ids[3])
    wf_conn.commit()
    with psycopg.connect(database_url, autocommit=True) as shared:
        store = WorkflowStore(shared)
        answers = guard_boundaries(boundaries_of(store, jobs, [checkpoint(0)] * len(jobs)))
    assert [(a.status, a.fenced, a.recorded) for a in answers] == [  # type: ignore[union-attr]
        ("running", True, True),
        ("running", True, True),
        ("pending", False, False),
        ("cancelled", True, False),
    ]
    assert recorded(wf_conn) == {ids[0]: [0], ids[1]: [0]}
    assert statuses(wf_conn) == {
        ids[0]: "running",
        ids[1]: "running",
        ids[2]: "pending",
        ids[3]: "cancelled",
    }


def test_a_groups_ends_end_only_the_executions_whose_last_checkpoint_was_written(
    wf_conn: Conn, database_url: str
) -> None:
    """Ending with a held checkpoint: an execution ends only if that checkpoint was written by
    this boundary (not if another writer had recorded its step first), as step_guard alone.
    kills: group-end-ignores-recorded"""
    ids = [start_workflow(wf_conn, "two_noops").execution_id for _ in range(3)]
    wf_conn.commit()
    jobs = claim_all(wf_conn, 3)
    wf_conn.execute(
        "INSERT INTO operation_outputs (execution_id, step_id, name, kind, output)"
        " VALUES (%s, 0, 'step-0', 'step', '\"theirs\"')",
        (ids[1],),
    )
    wf_conn.commit()
    with psycopg.connect(database_url, autocommit=True) as shared:
        store = WorkflowStore(shared)
        ends = [End("succeeded", {"n": 0}, None), End("succeeded", {"n": 1}, None),
                End("failed", None, "boom")]  # fmt: skip
        answers = guard_boundaries(boundaries_of(store, jobs, [checkpoint(0)] * 3, ends))
    assert [(a.status, a.fenced, a.recorded) for a in answers] == [  # type: ignore[union-attr]
        ("running", True, True),
        ("running", True, False),
        ("running", True, True),
    ]
    rows = wf_conn.execute(
        "SELECT id, status, output, error FROM workflow_executions ORDER BY id"
    ).fetchall()
    assert rows == [
        (ids[0], "succeeded", {"n": 0}, None),
        (ids[1], "pending", None, None),
        (ids[2], "failed", None, "boom"),
    ]


def test_a_row_the_database_refuses_fails_only_its_own_slice_in_a_group(
    wf_conn: Conn, database_url: str
) -> None:
    """kills: group-guard-no-fallback"""
    ids = [start_workflow(wf_conn, "two_noops").execution_id for _ in range(3)]
    wf_conn.commit()
    jobs = claim_all(wf_conn, 3)
    kinds = ["step", "no such kind", "transaction"]  # operation_outputs_kind_check refuses it
    with psycopg.connect(database_url, autocommit=True) as shared:
        store = WorkflowStore(shared)
        held = [checkpoint(0, kind) for kind in kinds]
        answers = guard_boundaries(boundaries_of(store, jobs, held))
    assert isinstance(answers[1], psycopg.errors.CheckViolation)
    assert [(a.status, a.recorded) for a in (answers[0], answers[2])] == [  # type: ignore[union-attr]
        ("running", True),
        ("running", True),
    ]
    assert recorded(wf_conn) == {ids[0]: [0], ids[2]: [0]}
    assert statuses(wf_conn)[ids[1]] == "pending"


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "grouped"])
def test_slices_run_together_give_the_outputs_and_effects_of_slices_run_alone(
    wf_conn: Conn, database_url: str, effects_file: Path, grouped: bool
) -> None:
    """Ten five-step executions (transaction steps writing ledger rows, external steps appending
    to a file) run by claims of ten: each ledger row once, each effect once, the same outputs
    either way; grouped, the ten ends were written by one statement (one transaction), alone by
    ten."""
    ids = [start_workflow(wf_conn, "five_steps", {"n": n}).execution_id for n in range(10)]
    wf_conn.commit()
    assert Slices(database_url, grouped=grouped).run_visible() == 10
    outputs = wf_conn.execute(
        "SELECT id, status, output FROM workflow_executions ORDER BY id"
    ).fetchall()
    assert outputs == [
        (eid, "succeeded", {"n": n, "steps": [10, "2", 30, "4", 50]}) for n, eid in enumerate(ids)
    ]
    ledger = Counter(wf_conn.execute("SELECT execution_id, step FROM wf_ledger").fetchall())
    assert ledger == Counter({(eid, step): 1 for eid in ids for step in (1, 3, 5)})
    effects = Counter(effects_file.read_text().split())
    assert effects == Counter({f"{eid}:{step}": 1 for eid in ids for step in (2, 4)})
    assert writers(wf_conn, "SELECT xmin FROM workflow_executions") == (1 if grouped else 10)


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "grouped"])
def test_a_groups_external_checkpoints_are_written_together_before_the_next_steps_run(
    wf_conn: Conn, database_url: str, grouped: bool
) -> None:
    """Two external steps: the first's checkpoint is written before the second runs (the second
    sees it committed), for the group in one statement, and the ends in another. Each step's
    times are the slice's clock, taken while it ran.
    kills: gather-runs-alone, group-boundary-times-not-seconds, boundary-times-not-seconds"""
    ids = [start_workflow(wf_conn, "held_checkpoint").execution_id for _ in range(8)]
    wf_conn.commit()
    before = time.time()
    assert Slices(database_url, grouped=grouped).run_visible() == 8
    after = time.time()
    outputs = wf_conn.execute("SELECT status, output FROM workflow_executions").fetchall()
    assert outputs == [("succeeded", [0])] * len(ids)
    first = "SELECT xmin FROM operation_outputs WHERE step_id = 0"
    assert writers(wf_conn, first) == (1 if grouped else 8)
    # The step returned None: a JSON null either way, with the step's own times.
    rows = wf_conn.execute(
        "SELECT DISTINCT jsonb_typeof(output), started_at <= finished_at,"
        " finished_at <= clock_timestamp() FROM operation_outputs WHERE step_id = 0"
    ).fetchall()
    assert rows == [("null", True, True)]
    times = wf_conn.execute(
        "SELECT extract(epoch FROM started_at)::float8, extract(epoch FROM finished_at)::float8"
        " FROM operation_outputs"
    ).fetchall()
    assert len(times) == 16
    # the database keeps microseconds: a bound may be rounded past by half of one
    assert all(before - 1e-6 <= start <= end <= after + 1e-6 for start, end in times), times
    assert writers(wf_conn, "SELECT xmin FROM workflow_executions") == (1 if grouped else 8)


def test_a_groups_boundary_write_reads_only_its_own_executions(wf_conn: Conn) -> None:
    """step_guard_many gets its rows as JSON, whose size the planner cannot see: joined with IN,
    it read every execution to hash them (a group's write grew with the table, about 0.1 ms a
    thousand executions). Now it looks each one up by its key.
    kills: group-guard-reads-every-execution"""
    with wf_conn.transaction():
        for _ in range(3000):
            start_workflow(wf_conn, "two_noops")
    wf_conn.execute("ANALYZE workflow_executions")
    jobs = claim_all(wf_conn, 8)
    store = WorkflowStore(wf_conn)
    boundaries = [b.as_row() for b in boundaries_of(store, jobs, [checkpoint(0)] * len(jobs))]
    sql = all_queries()["step_guard_many"].sql
    with wf_conn.transaction(force_rollback=True):
        row = wf_conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + sql,  # type: ignore[operator]
            {"boundaries": JSON_ENCODER.encode(boundaries)},
            prepare=False,
        ).fetchone()
    assert row is not None
    scans = [
        (node["Node Type"], node["Actual Rows"] * node["Actual Loops"])
        for node in nodes(row[0][0]["Plan"])
        if node.get("Relation Name") == "workflow_executions" and node["Node Type"] != "ModifyTable"
    ]
    assert scans and all(kind == "Index Scan" for kind, _ in scans), scans
    assert sum(rows for _, rows in scans) <= 3 * len(jobs), scans


def writers(conn: Conn, xmins: str) -> int:
    """How many transactions wrote the rows ``xmins`` selects (their xmin)."""
    row = conn.execute(f"SELECT count(DISTINCT xmin::text) FROM ({xmins}) AS rows").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "grouped"])
def test_a_step_result_postgresql_cannot_store_fails_its_workflow_with_the_reason(
    wf_conn: Conn, database_url: str, grouped: bool
) -> None:
    """Text with a NUL character (which jsonb refuses) returned by a step: its execution fails at
    that step with a sentence that says why, its slice's job succeeds (no retry of the slice
    that would fail the same way), and the execution run with it in a group is not touched.
    kills: step-value-shortcut-takes-nul, group-boundary-no-output-as-json-null"""
    bad = [start_workflow(wf_conn, "nul_result").execution_id for _ in range(2)]
    good = start_workflow(wf_conn, "two_noops").execution_id
    wf_conn.commit()
    assert Slices(database_url, grouped=grouped).run_visible() == 3
    assert statuses(wf_conn) == {bad[0]: "failed", bad[1]: "failed", good: "succeeded"}
    steps = wf_conn.execute(
        "SELECT execution_id, step_id, attempts, output IS NULL, error FROM operation_outputs"
        " WHERE execution_id = ANY(%s) ORDER BY 1",
        (bad,),
    ).fetchall()
    reason = "ValueError: the value holds a NUL character (\\x00), which PostgreSQL cannot store"
    assert steps == [(eid, 0, 3, True, reason) for eid in bad]
    ends = wf_conn.execute(
        "SELECT output IS NULL, error FROM workflow_executions WHERE id = ANY(%s)", (bad,)
    ).fetchall()
    assert all(no_output and "NUL character" in error for no_output, error in ends), ends
