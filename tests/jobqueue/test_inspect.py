"""The console's statements in queries.sql: what they read, and the bulk operations."""

import json
from typing import Any

import psycopg
import pytest

from jobqueue.inspect import JobFilter, JobInspector
from jobqueue.queries import all_queries
from jobqueue.store import JobStore
from tests.support.db import job_row, scalar
from tests.support.jobs import make_job

Conn = psycopg.Connection[Any]


def plan_nodes(conn: Conn, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every node of the statement's plan (EXPLAIN, planned as the inspector runs it)."""
    sql = "EXPLAIN (FORMAT JSON) " + all_queries()[name].sql
    plan = conn.execute(sql, params, prepare=False).fetchone()[0]  # type: ignore[index]
    nodes, stack = [], [plan[0]["Plan"]]
    while stack:
        node = stack.pop()
        nodes.append(node)
        stack.extend(node.get("Plans", []))
    return nodes


@pytest.fixture
def big(conn: Conn) -> Conn:
    """20,000 finished jobs beside a few hundred live ones, vacuumed and analyzed."""
    conn.execute(
        "INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at, last_error)"
        " SELECT 1, 'default', 'noop', CASE WHEN g % 50 = 0 THEN 'dead' ELSE 'succeeded' END,"
        "        1, now(), 'E: ' || g FROM generate_series(1, 20000) g"
    )
    conn.execute(
        "INSERT INTO jobs (tenant_id, queue, task, available_at)"
        " SELECT 1, 'default', 'noop', now() + (g % 3 - 1) * interval '1 hour'"
        " FROM generate_series(1, 300) g"
    )
    conn.execute("VACUUM ANALYZE jobs")
    return conn


@pytest.mark.parametrize("tenant_id", [None, 1])
def test_live_counts_read_the_live_and_dead_partitions_never_the_finished_jobs(
    big: Conn, tenant_id: int | None
) -> None:
    nodes = plan_nodes(
        big,
        "console_queue_live",
        {"tenant_id": tenant_id, "queue": None, "live_within_seconds": 60},
    )
    on_jobs = [node for node in nodes if node.get("Relation Name", "").startswith("jobs")]
    # the live partition and the dead one only: the finished jobs' partitions are not planned
    # (how each is read, by index or whole, is the planner's choice for tables this small)
    assert {node["Relation Name"] for node in on_jobs} == {"jobs_live", "jobs_dead"}


def test_live_counts_are_right(big: Conn) -> None:
    (row,) = JobInspector(big).queue_live(None)
    assert (row["available"], row["scheduled"], row["dead"], row["running"]) == (200, 100, 400, 0)
    assert row["oldest_waiting_seconds"] >= 3600


def test_a_state_filter_lets_the_planner_use_that_states_index(big: Conn) -> None:
    params = {**JobFilter(state="dead").params(), "before_id": None, "limit": 51}
    nodes = plan_nodes(big, "console_job_list", params)
    assert not [node for node in nodes if node["Node Type"] == "Seq Scan"]
    rows = JobInspector(big).jobs(JobFilter(state="dead"), None, 51)
    assert len(rows) == 51 and {row["state"] for row in rows} == {"dead"}


def test_the_job_filter_tells_scheduled_from_waiting(big: Conn) -> None:
    inspector = JobInspector(big)
    scheduled = inspector.jobs(JobFilter(state="scheduled"), None, 500)
    waiting = inspector.jobs(JobFilter(state="available"), None, 500)
    assert (len(scheduled), len(waiting)) == (100, 200)
    assert {row["state"] for row in scheduled} == {"scheduled"}
    assert {row["state"] for row in waiting} == {"available"}


@pytest.mark.parametrize(
    ("error", "pattern"),
    [
        ("ValueError: job 17 took 0.25s", "ValueError: job # took #.#s"),
        ("LeaseExpired: worker web-01:4242:9f2c1a gone", "LeaseExpired: worker web-#:#:# gone"),
        ("SMTPError: 550 <ana@x.example> unknown", "SMTPError: # <email> unknown"),
        ("KeyError: 'user_id'\nsecond line", "KeyError: 'user_id'"),
        (None, ""),
    ],
)  # fmt: skip
def test_the_error_pattern_blanks_what_varies(conn: Conn, error: str | None, pattern: str) -> None:
    assert scalar(conn, "SELECT job_error_pattern(%s)", error) == pattern


def test_requeue_many_skips_jobs_whose_unique_key_is_held(conn: Conn) -> None:
    plain = make_job(conn, state="dead", error="E: x", queue="mail")
    held = make_job(conn, state="dead", unique_key="k1", error="E: x")
    make_job(conn, unique_key="k1")  # a live job holds k1
    older, newer = (make_job(conn, state="cancelled", unique_key="k2") for _ in range(2))
    running = make_job(conn, state="running")
    conn.execute("LISTEN pauta_jobs")
    changed = JobStore(conn).requeue_many({plain: 3, held: 3, older: 2, newer: 2, running: 3})
    assert sorted(changed) == [(plain, 1, "mail"), (newer, 1, "default")]
    assert (job_row(conn, plain)["max_attempts"], job_row(conn, newer)["max_attempts"]) == (4, 3)
    assert [job_row(conn, job)["state"] for job in (held, older, running)] == [
        "dead", "cancelled", "running",
    ]  # fmt: skip
    assert {note.payload for note in conn.notifies(timeout=0.5, stop_after=2)} == {
        "mail",
        "default",
    }


def test_discard_turns_only_dead_jobs_into_cancelled_ones(conn: Conn) -> None:
    dead = make_job(conn, state="dead", error="E: x")
    waiting = make_job(conn)
    changed = JobStore(conn).discard([dead, waiting])
    assert changed == [(dead, 1, "default")]
    row = job_row(conn, dead)
    assert (row["state"], row["last_error"], row["finished_at"] is not None) == (
        "cancelled", "E: x", True,
    )  # fmt: skip
    assert job_row(conn, waiting)["state"] == "available"


def test_failure_groups_and_their_jobs_share_one_fingerprint(conn: Conn) -> None:
    for n in range(3):
        make_job(conn, "fail", {"n": n}, state="dead", error=f"E: id {n}", tenant_id=1)
    make_job(conn, "fail", state="dead", error="Other: thing")
    inspector = JobInspector(conn)
    first, second = inspector.failure_groups(None, None, 10)
    assert (first["jobs"], first["pattern"], first["error_class"]) == (3, "E: id #", "E")
    assert second["jobs"] == 1
    jobs = inspector.failure_jobs(first["fingerprint"], None, limit=10)
    assert [job["id"] for job in jobs] == [3, 2, 1]
    assert [job["id"] for job in inspector.failure_jobs(first["fingerprint"], None, max_id=2,
                                                         limit=10)] == [2, 1]  # fmt: skip
    assert [job["id"] for job in inspector.failure_jobs(first["fingerprint"], None, ids=[1, 4],
                                                         limit=10)] == [1]  # fmt: skip
    assert inspector.failure_group(second["fingerprint"], None) == second
    assert inspector.failure_group(second["fingerprint"], 99) is None
    assert json.loads(jobs[0]["payload_preview"]) == {"n": 2}


def test_a_failure_group_is_read_from_its_range_of_the_fingerprint_index(big: Conn) -> None:
    fingerprint = scalar(big, "SELECT md5('noop' || E'\\n' || job_error_pattern('E: 50'))")
    params = {"fingerprint": fingerprint, "tenant_id": None, "max_id": None, "ids": None,
              "before_id": None, "limit": 101}  # fmt: skip
    for name in ("console_failure_group_jobs", "console_failure_group", "console_failure_groups"):
        nodes = plan_nodes(big, name, {**params, "queue": None})
        indexes = {node.get("Index Name") for node in nodes}
        assert "jobs_dead_fingerprint_idx" in indexes, name
        # jobs_dead holds only the 400 dead jobs: the planner may read it whole to join the
        # groups' newest jobs; nothing else is read whole
        scanned = {node["Relation Name"] for node in nodes if node["Node Type"] == "Seq Scan"}
        assert scanned <= {"jobs_dead"}, (name, scanned)
    (group,) = JobInspector(big).failure_groups(None, None, 10)
    assert (group["fingerprint"], group["jobs"], group["pattern"]) == (fingerprint, 400, "E: #")


def test_a_rare_error_is_found_through_the_trigram_index(big: Conn) -> None:
    big.execute(
        "INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at, last_error)"
        " SELECT 1, 'default', 'fail', 'dead', 1, now() - interval '1 day', 'GremlinError: ' || g"
        " FROM generate_series(1, 5) g"
    )
    big.execute("INSERT INTO jobs (tenant_id, queue, task, state, attempt, finished_at)"
                " SELECT 1, 'default', 'noop', 'succeeded', 1, now()"
                " FROM generate_series(1, 20000)")  # fmt: skip
    big.execute("VACUUM ANALYZE jobs")
    params = {**JobFilter(error="gremlin").params(), "before_id": None, "limit": 51}
    nodes = plan_nodes(big, "console_job_list", params)
    # each partition's share of jobs_error_search_idx is named after it (..._last_error_idx);
    # the 40,000 finished jobs' partition is read through its share, never whole
    names = {node.get("Index Name") or "" for node in nodes}
    assert any(name.startswith("jobs_done_") and name.endswith("_last_error_idx") for name in names)
    scanned = {node["Relation Name"] for node in nodes if node["Node Type"] == "Seq Scan"}
    holding = {row[0] for row in big.execute("SELECT DISTINCT tableoid::regclass::text FROM jobs")}
    assert not scanned & holding - {"jobs_live", "jobs_dead"}, scanned  # empty ones: no matter
    rows = JobInspector(big).jobs(JobFilter(error="gremlin"), None, 51)
    assert [row["last_error"] for row in rows] == [f"GremlinError: {n}" for n in range(5, 0, -1)]


def test_a_bounded_search_reads_only_its_range_of_ids(big: Conn) -> None:
    newest = scalar(big, "SELECT max(id) FROM jobs")
    where = JobFilter(payload_key="n", payload_value="1", min_id=newest - 99)
    nodes = plan_nodes(big, "console_job_list", {**where.params(), "before_id": None, "limit": 51})
    holding = {row[0] for row in big.execute("SELECT DISTINCT tableoid::regclass::text FROM jobs")}
    big_ones = holding - {"jobs_live", "jobs_dead"}  # the 19,600 succeeded jobs' partition
    on_jobs = [node for node in nodes if node.get("Relation Name") in big_ones]
    # the finished jobs through their partition's share of jobs_id_idx (named after it); the
    # few hundred live and dead ones and the empty partitions may be read whole
    assert on_jobs and all(node.get("Index Name", "").endswith("_id_idx") for node in on_jobs)
    assert JobInspector(big).search_facts() == {"error_indexed": True, "newest_id": newest}
