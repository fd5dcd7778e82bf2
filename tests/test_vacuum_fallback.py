"""When autovacuum will not visit the engine's hot tables (off on the server, or off for a table),
the worker says so at start and the maintenance leader vacuums them itself on a schedule.

The test server runs with ``autovacuum = off`` (a CI setting), as some production servers do;
a cluster of our own (devtools.cluster, autovacuum on) shows the per-table case and the quiet
case."""

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from devtools.cluster import Cluster
from jobqueue import JobRequest, JobStore, enqueue_many
from tests.support.db import scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]


def vacuums(conn: Conn, table: str) -> tuple[int, int]:
    """(manual vacuums, autovacuums) of ``table`` so far."""
    row = conn.execute(
        "SELECT vacuum_count, autovacuum_count FROM pg_stat_user_tables WHERE relname = %s",
        (table,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def test_with_autovacuum_off_the_leader_vacuums_the_hot_tables_on_a_schedule(
    conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    if scalar(conn, "SHOW autovacuum") != "off":
        pytest.skip("the test server runs autovacuum: the fallback stays off")
    assert JobStore(conn).autovacuum_gaps() == [
        (table, "autovacuum = off on the server")
        for table in ("job_stats_minute", "jobs_dead", "jobs_live", "leaders", "workers")
    ]
    with conn.transaction():
        enqueue_many(conn, [JobRequest("noop")] * 3000)
    worker = start_worker(
        workers, database_url, "--single", "--queues", "default=4", "--vacuum-seconds", "1",
        "--sweep", "0.5", "--leader-lease-seconds", "2",
    )  # fmt: skip
    worker.wait_for_line(
        r"autovacuum will not vacuum job_stats_minute, jobs_dead, jobs_live, leaders, workers "
        r"\(autovacuum = off on the server\); the maintenance leader will VACUUM them every 1s"
    )
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == 3000)
    # the claim's table: 3,000 jobs passed through it, each leaving dead versions behind
    before = vacuums(conn, "jobs_live")[0]
    wait_until(lambda: vacuums(conn, "jobs_live")[0] >= before + 2, timeout=15)  # again and again
    assert vacuums(conn, "jobs_live")[1] == 0  # autovacuum never came
    dead = scalar(conn, "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'jobs_live'")
    assert dead < 1000, f"{dead} dead rows left in jobs_live after the leader's vacuums"


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Cluster, str]]:
    """A cluster of our own with autovacuum on (devtools.cluster's production settings)."""
    with Cluster() as cluster:
        url = cluster.create_database("pauta")
        from flask_migrate import upgrade

        from app import create_app
        from models import db

        app = create_app({"DATABASE_URL": url, "SECRET_KEY": "test"})
        with app.app_context():
            upgrade()
            db.engine.dispose()
        yield cluster, url


def test_autovacuum_turned_off_for_one_table_is_a_gap_and_on_everywhere_none(
    cluster: tuple[Cluster, str],
) -> None:
    _, url = cluster
    with psycopg.connect(url, autocommit=True) as conn:
        store = JobStore(conn)
        assert store.autovacuum_gaps() == []
        conn.execute("ALTER TABLE jobs_live SET (autovacuum_enabled = off)")
        try:
            assert store.autovacuum_gaps() == [
                ("jobs_live", "autovacuum_enabled = off on the table")
            ]
        finally:
            conn.execute("ALTER TABLE jobs_live RESET (autovacuum_enabled)")


def test_the_churning_tables_carry_their_storage_parameters(conn: Conn) -> None:
    options = dict(
        conn.execute(
            "SELECT relname, reloptions FROM pg_class"
            " WHERE relname IN ('jobs_live', 'jobs_dead', 'job_stats_minute')"
        ).fetchall()
    )
    assert {"fillfactor=80", "autovacuum_vacuum_cost_delay=0", "autovacuum_vacuum_scale_factor=0",
            "autovacuum_vacuum_threshold=2000"} <= set(options["jobs_live"])  # fmt: skip
    assert "autovacuum_vacuum_scale_factor=0.05" in options["jobs_dead"]
    assert "fillfactor=70" in options["job_stats_minute"]


def test_the_leader_vacuums_jobs_live_when_dead_rows_pile_up_between_autovacuum_visits(
    cluster: tuple[Cluster, str], workers: list[WorkerProcess]
) -> None:
    """Autovacuum on, and no gap: autovacuum still comes by once a minute, and between its
    visits a busy queue leaves every claim more dead rows to walk past. The leader VACUUMs
    jobs_live past vacuum_dead_rows (a manual vacuum: autovacuum's are counted apart).
    kills: a leader that leaves jobs_live to autovacuum's visits"""
    _, url = cluster
    with psycopg.connect(url, autocommit=True) as conn:
        assert JobStore(conn).autovacuum_gaps() == []  # so no vacuum on a schedule either
        before = vacuums(conn, "jobs_live")[0]
        with conn.transaction():
            enqueue_many(conn, [JobRequest("noop")] * 5000)
        start_worker(
            workers, url, "--single", "--queues", "default=4", "--vacuum-dead-rows", "2000",
            "--sweep", "0.5",
        )  # fmt: skip
        wait_until(
            lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == 5000,
            timeout=60,
        )
        wait_until(lambda: vacuums(conn, "jobs_live")[0] > before, timeout=15)


def statistics_versions(conn: Conn) -> list[int]:
    """The row versions (xmin) of jobs_live's column statistics: ANALYZE writes new ones."""
    return [
        int(row[0])
        for row in conn.execute(
            "SELECT xmin::text::bigint FROM pg_statistic WHERE starelid = 'jobs_live'::regclass"
            " ORDER BY staattnum"
        )
    ]


def test_the_leaders_vacuum_of_jobs_live_analyzes_it_while_it_has_no_statistics(
    conn: Conn,
) -> None:
    """A new database has no statistics for jobs_live until autovacuum first comes by (a
    minute or more; never with autovacuum off), and meanwhile the planner's guesses made a
    soak's claims take 8 ms instead of 1.5. The leader's vacuum of jobs_live adds ANALYZE then,
    and only then.
    kills: a live-table vacuum that never analyzes; one that analyzes every time"""
    with conn.transaction():
        enqueue_many(conn, [JobRequest("noop")] * 500)
    # as in a new database: never analyzed
    conn.execute("DELETE FROM pg_statistic WHERE starelid = 'jobs_live'::regclass")
    store = JobStore(conn)
    store.vacuum_live_table()
    first = statistics_versions(conn)
    assert first, "jobs_live still has no statistics after the leader's vacuum"
    store.vacuum_live_table()
    assert statistics_versions(conn) == first, "jobs_live was analyzed again"


def test_the_leader_analyzes_jobs_live_when_a_burst_outgrows_its_statistics(
    cluster: tuple[Cluster, str], workers: list[WorkerProcess]
) -> None:
    """Autovacuum on, so no scheduled vacuum: a burst into a near-empty queue would leave the
    planner believing in a table of a few rows until autovacuum's next visit. The leader's next
    round analyzes jobs_live (a manual ANALYZE: autovacuum's are counted apart).
    kills: leader-never-analyzes-outgrown-live-table"""
    _, url = cluster
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE jobs_live")
        before = analyzes(conn)
        with conn.transaction():  # into a queue no worker serves here: they stay waiting
            enqueue_many(conn, [JobRequest("noop", queue="later")] * 20_000)
        # the last test's worker was killed holding the maintenance lease: let it lapse now
        conn.execute("UPDATE leaders SET expires_at = now()")
        start_worker(workers, url, "--single", "--queues", "default=1", "--sweep", "0.5")
        wait_until(lambda: analyzes(conn) > before, timeout=20)
        known = scalar(conn, "SELECT reltuples FROM pg_class WHERE oid = 'jobs_live'::regclass")
        assert known >= 20_000, known


def analyzes(conn: Conn) -> int:
    """Manual ANALYZEs of jobs_live so far (VACUUM with ANALYZE counts too)."""
    return int(
        scalar(conn, "SELECT analyze_count FROM pg_stat_user_tables WHERE relname = 'jobs_live'")
    )
