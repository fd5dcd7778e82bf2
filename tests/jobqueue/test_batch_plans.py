"""The batch writes of a worker (job_finish, job_release, job_extend_leases) do work in
proportion to the batch, whatever the statistics say.

Statistics that know nothing of the running jobs (taken of the empty table at migration, as
on every new install until autovacuum comes round, and for good on a server with autovacuum
off) leave the planner guessing one row of this worker in jobs_live. The statements used to
join the worker's rows to the batch in a nested loop on that guess: a batch of n results
against the worker's r running jobs cost n x r rows, 1,000 results took seconds, the heartbeat
waited on them until leases expired, and a soak stalled for a minute after every start.
Driven by the batch (a LATERAL look-up by id per row), the plan has no other shape to take.
"""

import json
import re
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue_many
from jobqueue.store import AttemptResult
from tests.jobqueue.test_enqueue_plans import explain, nodes
from tests.support.db import scalar
from tests.support.processes import wait_until

Conn = psycopg.Connection[Any]

BATCH = 1000
JOBS = 20_000
LIVE_ROWS = "SELECT n_live_tup FROM pg_stat_user_tables WHERE relid = 'jobs_live'::regclass"


def rows_touched(plan: dict[str, Any]) -> int:
    """Rows every node of the plan produced or threw away, over all its loops."""
    return sum(
        (
            node.get("Actual Rows", 0)
            + node.get("Rows Removed by Filter", 0)
            + node.get("Rows Removed by Join Filter", 0)
        )
        * node.get("Actual Loops", 1)
        for node in nodes(plan["Plan"])
    )


def filtered_by_subplan(plan: dict[str, Any]) -> list[str]:
    """Filters that run a subplan per row. `(id, attempt) NOT IN (SELECT ... FROM finished)`
    was one: hashed while the rows fit in work_mem, a scan of them per row past it (n x n: the
    heartbeat of a worker holding 20,000 jobs ran 10 s, the completer waiting on its locks)."""
    return [node["Filter"] for node in nodes(plan["Plan"]) if "SubPlan" in node.get("Filter", "")]


def executed_plan(conn: Conn, name: str, params: dict[str, Any], plans: str) -> dict[str, Any]:
    """The plan statement ``name`` ran with, prepared as the runner's links prepare it, under
    ``plan_cache_mode = plans`` (EXPLAIN of a statement with parameters plans it for their
    values, so the generic plan is read from auto_explain, which sends it as a notice)."""
    notices: list[str] = []
    conn.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
    conn.execute("LOAD 'auto_explain'")
    for setting, value in (
        ("auto_explain.log_min_duration", "0"),
        ("auto_explain.log_analyze", "on"),
        ("auto_explain.log_format", "json"),
        ("auto_explain.log_level", "notice"),
        ("plan_cache_mode", plans),
    ):
        conn.execute(f"SET {setting} = '{value}'")
    with conn.transaction(force_rollback=True):
        conn.execute(JobStore(conn)._queries[name].sql, params, prepare=True).fetchall()
    conn.execute("SET auto_explain.log_min_duration = -1")
    plans_seen = [json.loads(text.split("plan:", 1)[1]) for text in notices if "plan:" in text]
    assert len(plans_seen) == 1, notices
    return plans_seen[0]  # type: ignore[no-any-return]


def claimed_with_stale_statistics(conn: Conn) -> list[tuple[int, int]]:
    enqueue_many(conn, [JobRequest("noop")] * JOBS)  # jobs_live's statistics: of it empty
    jobs = JobStore(conn).claim("default", BATCH, "w1", 30)
    assert len(jobs) == BATCH
    return [(job.id, job.attempt) for job in jobs]


# What each statement takes beside the batch's ids and attempts, for n rows.
EXTRA_PARAMS: dict[str, Callable[[int], dict[str, Any]]] = {
    "job_finish": lambda n: {
        "outcomes": ["succeeded"] * n,
        "errors": [None] * n,
        "tracebacks": [None] * n,
        "retry_delays": [0.0] * n,
        "durations": [0.001] * n,
        "trace_ids": [None] * n,
    },
    "job_extend_leases": lambda n: {"lease_seconds": 30.0},
    "job_release": lambda n: {"started": [True] * n, "durations": [0.001] * n},
}


@pytest.mark.parametrize("plans", ["force_custom_plan", "force_generic_plan"])
@pytest.mark.parametrize("statement", sorted(EXTRA_PARAMS))
def test_a_batch_write_touches_rows_in_proportion_to_the_batch(
    conn: Conn, statement: str, plans: str
) -> None:
    """In a plan made for the batch and in the generic plan, which knows no batch's size: the
    runner's links prepare these statements (PLANNED_PER_BATCH leaves them out), and
    PostgreSQL may choose either. kills: finish-locks-by-join"""
    held = claimed_with_stale_statistics(conn)
    params = {
        "ids": [job_id for job_id, _ in held],
        "attempts": [attempt for _, attempt in held],
        "worker": "w1",
        **EXTRA_PARAMS[statement](len(held)),
    }
    plan = executed_plan(conn, statement, params, plans)
    # a generic plan names its parameters ($3: the worker), a custom one their values
    assert bool(re.search(r"\$\d", json.dumps(plan["Plan"]))) == (plans == "force_generic_plan")
    # n rows through a handful of nodes and a pass over jobs_live at most, not n x n (2,000,000)
    assert rows_touched(plan) < 5 * JOBS, plan
    assert filtered_by_subplan(plan) == [], plan


def test_a_finish_checks_no_tenant_per_job_it_moves_out_of_the_live_table(conn: Conn) -> None:
    """A cross-partition update is a delete and an insert, and the tenant foreign key checked
    each moved row's tenant again (a seventh of job_finish's time); the tenant check runs on
    inserts only, and a moved job keeps its tenant. Triggers left: one call per statement."""
    enqueue_many(conn, [JobRequest("noop")] * 100)
    held = JobStore(conn).claim("default", 100, "w1", 30)
    params = {
        "ids": sorted(job.id for job in held),
        "attempts": [1] * len(held),
        "worker": "w1",
        **EXTRA_PARAMS["job_finish"](len(held)),
    }
    plan = explain(conn, "job_finish", params)
    moved = [n for n in nodes(plan["Plan"]) if n.get("Node Type") == "ModifyTable"]
    assert moved and plan["Triggers"], plan
    assert {t["Trigger Name"]: t["Calls"] for t in plan["Triggers"] if t["Calls"] > 1} == {}, plan


def test_the_rescue_reads_the_live_table_by_id_however_long_the_queue(conn: Conn) -> None:
    """Joined to the expired leases alone, the rescue's update let the planner hash the whole
    live table (as the claims' did). kills: rescue-joins-expired"""
    conn.execute(
        "INSERT INTO jobs (tenant_id, queue, task)"
        " SELECT 1, 'default', 'noop' FROM generate_series(1, 50000)"
    )
    conn.execute(
        "UPDATE jobs SET state = 'running', attempt = 1, locked_by = 'w1', started_at = now(),"
        " lease_expires_at = now() + CASE WHEN id % 25 = 0 THEN interval '-1 minute'"
        " ELSE interval '1 minute' END WHERE id % 2 = 0"
    )
    conn.execute("ANALYZE jobs")
    plan = explain(conn, "job_rescue_expired", {"limit": 1000})
    scans = {(n["Node Type"], n.get("Relation Name")) for n in nodes(plan["Plan"])}
    assert ("Seq Scan", "jobs_live") not in scans, plan
    assert ("Index Scan", "jobs_live") in scans, plan
    assert plan["Plan"]["Plans"] and rows_touched(plan) < 20_000, plan


PREPARED = "SELECT statement FROM pg_prepared_statements"


def test_the_runners_batch_writes_are_prepared_the_consoles_are_not(database_url: str) -> None:
    """A prepared job_finish is parsed once per connection instead of at every batch (0.47 ms
    of a 2.04 ms one-result call, ``bench.hot_statements --only finish``): on a connection with
    psycopg's default threshold it is prepared at its fifth run, as the heartbeat's
    job_extend_leases is. The console's discard is never prepared (PLANNED_PER_BATCH): no plan
    test holds its generic plan. kills: finish-planned-per-batch-again,
    console-batch-writes-prepared"""
    with psycopg.connect(database_url, autocommit=True) as conn:
        store = JobStore(conn)
        for _ in range(6):
            enqueue_many(conn, [JobRequest("noop")] * 3)
            claimed = store.claim("default", 3, "w1", 30)
            held = [(job.id, job.attempt) for job in claimed]
            assert set(store.extend_leases(held, "w1", 30).values()) == {"extended"}
            results = [AttemptResult(job, "dead", "no", None, 0, 0) for job in claimed]
            assert {fate.how for fate in store.finish(results, "w1").values()} == {"written"}
            assert len(store.discard([job.id for job in claimed])) == 3
        prepared = " ".join(row[0] for row in conn.execute(PREPARED))
    assert "INSERT INTO job_stats_minute" in prepared  # job_finish
    assert "lease_expires_at = now() + make_interval" in prepared  # job_extend_leases
    assert "SET state = 'cancelled', finished_at = now()" not in prepared  # job_discard


@pytest.mark.parametrize("plans", ["force_custom_plan", "force_generic_plan"])
def test_a_burst_the_statistics_have_not_seen_is_analyzed_and_the_fair_claim_reads_little(
    conn: Conn, plans: str
) -> None:
    """Statistics of a near-empty jobs_live (a new install, or a queue drained when ANALYZE
    last came by) let the planner walk the queue's tenants by the claim index with a sort: each
    fair claim read every waiting job of the queue, twice, until autovacuum's next ANALYZE (a
    minute or more; never with it off). The leader's round analyzes jobs_live once it holds far
    more rows than its statistics know, and only then.
    kills: live-table-outgrown-ignores-statistics"""
    conn.execute("ANALYZE jobs_live")  # of it empty, as at migration
    enqueue_many(conn, [JobRequest("noop", queue="workflows")] * JOBS)
    wait_until(lambda: scalar(conn, LIVE_ROWS) >= JOBS, timeout=20)  # as the backend reports it
    # (whether the planner's guess goes wrong depends on details as small as the length of the
    # queue's name: with "default" it happened to pick the right index)
    params = {"queue": "workflows", "limit": 30, "worker": "w1", "lease_seconds": 30.0}
    assert rows_touched(executed_plan(conn, "job_claim_fair", params, plans)) >= 2 * JOBS
    store = JobStore(conn)
    assert store.analyze_live_table_if_outgrown(10_000)
    assert rows_touched(executed_plan(conn, "job_claim_fair", params, plans)) < 1000
    assert not store.analyze_live_table_if_outgrown(10_000), "analyzed again, with no cause"
