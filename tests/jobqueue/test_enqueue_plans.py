"""The insert paths' plans, as EXPLAIN (ANALYZE) reports them: what runs once per statement stays
once per statement (bench/profile_breakdown.py measures what each part costs)."""

from typing import Any

import psycopg
import pytest

from jobqueue import JobStore
from jobqueue.store import NewJob, batch_params

Conn = psycopg.Connection[Any]

BATCH = 500


def explain(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any]:
    sql = JobStore(conn)._queries[name].sql
    with conn.transaction(force_rollback=True):  # EXPLAIN ANALYZE inserts: undo it
        row = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql,  # type: ignore[operator]
            params,
            prepare=False,
        ).fetchone()
    assert row is not None
    return row[0][0]


def nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    found = [plan]
    for child in plan.get("Plans", []):
        found += nodes(child)
    return found


def triggers(plan: dict[str, Any]) -> dict[str, int]:
    """Calls of each trigger: the insert trigger by name, the tenant foreign key's as 'fk'."""
    return {
        "fk" if t["Trigger Name"].startswith("RI_ConstraintTrigger") else t["Trigger Name"]: (
            t["Calls"]
        )
        for t in plan["Triggers"]
    }


@pytest.mark.parametrize("mixed", [False, True], ids=["one of each column", "columns that vary"])
def test_a_batch_insert_looks_the_system_tenant_up_once_and_wakes_workers_once(
    conn: Conn, mixed: bool
) -> None:
    """job_insert_many: the system tenant's id is an InitPlan (evaluated once, not per row), and
    the insert trigger runs once for the statement, and with it the tenant check: no trigger
    runs per row (the tenant foreign key did, until 0021_tenant_check). The same whether a
    column comes as the batch's one value or as an array (JobStore.insert_jobs). The rows go
    straight to jobs_live: no routing through the parent."""
    jobs = [
        NewJob(
            task="noop",
            queue=f"q{n % 3}" if mixed else "default",
            tenant_id=None,
            priority=n % 5 if mixed else 0,
            max_attempts=3,
            delay_seconds=float(n % 2) if mixed else 0.0,
            run_at=None,
            unique_key=None,
        )
        for n in range(BATCH)
    ]
    params = batch_params(jobs, "[" + ",".join(['{"n": 1}'] * BATCH) + "]")
    assert bool(params["queues"]) is mixed and bool(params["priorities"]) is mixed
    plan = explain(conn, "job_insert_many", params)
    every = nodes(plan["Plan"])
    tenant_lookups = [n for n in every if n.get("Relation Name") == "tenants"]
    assert tenant_lookups, plan
    for lookup in tenant_lookups:
        assert lookup["Actual Loops"] == 1, plan
    assert not [n for n in every if n.get("Parent Relationship") == "SubPlan"], plan
    assert triggers(plan) == {"jobs_after_insert": 1}, plan
    [insert] = [n for n in every if n["Node Type"] == "ModifyTable"]
    assert insert["Relation Name"] == "jobs_live", plan


def test_a_single_insert_runs_one_trigger_call_and_one_tenant_check(conn: Conn) -> None:
    """job_insert: one row, one statement trigger call (which checks the tenant), and the unique
    key's conflict is resolved by an index (an arbiter), not by a scan."""
    params = {
        "tenant_id": None,
        "queue": "default",
        "task": "noop",
        "payload": "{}",
        "priority": 0,
        "max_attempts": 3,
        "run_at": None,
        "delay": 0.0,
        "unique_key": None,
        "trace_context": None,
        "timeout": None,
    }
    plan = explain(conn, "job_insert", params)
    insert = plan["Plan"]
    assert insert["Node Type"] == "ModifyTable", plan
    assert insert["Conflict Resolution"] == "NOTHING", plan
    assert insert["Conflict Arbiter Indexes"], plan
    scans_of_jobs = [n for n in nodes(insert) if n.get("Relation Name") == "jobs"]
    assert not [n for n in scans_of_jobs if n["Node Type"] == "Seq Scan"], plan
    assert triggers(plan) == {"jobs_after_insert": 1}, plan
