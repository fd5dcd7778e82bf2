"""What the table layout costs and saves (migration 0017_table_layout), on whichever layout the
checkout it runs from has: the partitioned one (jobs_live, jobs_dead, jobs_done partitions) or
0014's single jobs table. Run it once from each checkout, each on a database of its own:

    DATABASE_URL=postgresql://... python -m bench.table_layout [--jobs 20000] [--history 300000]
        [--prune 100000] [--database NAME] [--out docs/benchmarks/2026-12-01-table-layout.jsonl]

(for a checkout at 0014, copy the file out of bench/ and run it there with PYTHONPATH set to
that checkout, so that `jobqueue` and the migrations are its own). Each line written is one figure:

- ``finish``: claim-and-finish throughput of one connection (batches of 100 no-op jobs
  claimed, then finished succeeded, as a runner's claimer and completer do; ANALYZE after the
  enqueue, as autovacuum would have run it), with an empty
  history and again beside ``--history`` finished jobs;
- ``churn``: after those drains, the claim's table (jobs, or jobs_live) and its indexes:
  size, dead tuples, then the time of a VACUUM and the size and dead tuples after it;
- ``prune``: removing ``--prune`` finished jobs (with one attempt row each) past retention, by
  the layout's way: 0014's job_prune batches (DELETE of 5,000 at a time, attempts by cascade)
  then the VACUUM that reclaims them; 0017's history_partitions (DROP of whole partitions).

The database is created (the name given, dropped first) and migrated to the checkout's head.
"""

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from jobqueue import JobRequest, JobStore, enqueue_many
from jobqueue.store import AttemptResult

WORKER = "bench:1:table-layout"
BATCH = 100


def migrated(server: str, name: str) -> str:
    admin = make_url(server).set(database="postgres").render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        connection.execute(f"CREATE DATABASE {name}")
    url = make_url(server).set(database=name).render_as_string(False)
    from flask_migrate import upgrade

    from app import create_app
    from models import db

    app = create_app({"DATABASE_URL": url, "SECRET_KEY": "bench"})
    with app.app_context():
        upgrade()
        db.engine.dispose()
    return url


def drain(conn: psycopg.Connection[Any], jobs: int) -> float:
    """Enqueue ``jobs`` no-op jobs, then claim and finish them in batches; returns jobs/s."""
    for start in range(0, jobs, 5000):
        with conn.transaction():
            enqueue_many(conn, [JobRequest("noop")] * min(5000, jobs - start))
    # as autovacuum would have by now (the server here runs with it off): statistics that know
    # the claim's table holds the jobs just enqueued
    conn.execute("ANALYZE jobs")
    store = JobStore(conn)
    done = 0
    started = time.perf_counter()
    while claimed := store.claim("default", BATCH, WORKER, 60):
        store.finish([AttemptResult(job, "succeeded", None, None, 0.0, 0.0) for job in claimed],
                     WORKER)  # fmt: skip
        done += len(claimed)
    elapsed = time.perf_counter() - started
    assert done == jobs, (done, jobs)
    return jobs / elapsed


def history(conn: psycopg.Connection[Any], rows: int, hours_ago: float) -> None:
    """``rows`` succeeded jobs finished ``hours_ago`` hours ago, one attempt row each."""
    conn.execute(
        "INSERT INTO jobs (tenant_id, queue, task, state, attempt, started_at, finished_at)"
        " SELECT 1, 'default', 'noop', 'succeeded', 1, now(), now() - make_interval(secs => %s)"
        " FROM generate_series(1, %s)",
        (hours_ago * 3600, rows),
    )
    conn.execute(
        "INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,"
        " duration) SELECT id, 1, 'w', started_at, finished_at, 'succeeded', '0.01s' FROM jobs"
        " WHERE state = 'succeeded' AND finished_at < now() - make_interval(secs => %s)",
        ((hours_ago - 0.5) * 3600,),
    )


def table_figures(conn: psycopg.Connection[Any], table: str) -> dict[str, Any]:
    conn.execute("SELECT pg_stat_force_next_flush()")
    row = conn.execute(
        "SELECT pg_relation_size(c.oid), pg_indexes_size(c.oid), s.n_dead_tup, s.n_live_tup"
        " FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid WHERE c.relname = %s",
        (table,),
    ).fetchone()
    assert row is not None
    return {"table_bytes": row[0], "index_bytes": row[1], "dead_tuples": row[2],
            "live_tuples": row[3]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--database", default=None, help="name of the bench's own database")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--history", type=int, default=300000)
    parser.add_argument("--prune", type=int, default=100000)
    parser.add_argument("--out", default=None)
    arguments = parser.parse_args()
    server = arguments.database_url or os.environ["DATABASE_URL"]
    url = migrated(server, arguments.database or "bench_table_layout")
    lines: list[dict[str, Any]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        partitioned = conn.execute("SELECT to_regclass('jobs_live') IS NOT NULL").fetchone()
        layout = "0017_table_layout" if partitioned and partitioned[0] else "0014_scale"
        hot = "jobs_live" if layout == "0017_table_layout" else "jobs"
        common = {"layout": layout, "at": datetime.now(UTC).isoformat(timespec="seconds"),
                  "host": platform.node(), "python": sys.version.split()[0]}  # fmt: skip

        def emit(measure: str, **figures: Any) -> None:
            line = {**common, "measure": measure, **figures}
            lines.append(line)
            print(json.dumps(line), flush=True)

        conn.execute("VACUUM ANALYZE")
        rate = drain(conn, arguments.jobs)
        emit("finish", history=0, jobs=arguments.jobs, jobs_per_second=round(rate, 1))
        history(conn, arguments.history, 2)
        conn.execute("VACUUM ANALYZE")
        rate = drain(conn, arguments.jobs)
        emit("finish", history=arguments.history, jobs=arguments.jobs,
             jobs_per_second=round(rate, 1))  # fmt: skip

        before = table_figures(conn, hot)
        started = time.perf_counter()
        conn.execute(f"VACUUM {hot}")
        vacuum_seconds = time.perf_counter() - started
        after = table_figures(conn, hot)
        emit("churn", table=hot, after_jobs=2 * arguments.jobs, before_vacuum=before,
             vacuum_seconds=round(vacuum_seconds, 3), after_vacuum=after)  # fmt: skip

        # prune: the jobs finished 20 hours ago, kept 12 hours
        conn.execute("TRUNCATE jobs, job_attempts")
        history(conn, arguments.prune, 20)
        conn.execute("VACUUM ANALYZE")
        store = JobStore(conn)
        term = store.elect("maintenance", WORKER, 600)
        assert term is not None
        started = time.perf_counter()
        if layout == "0017_table_layout":
            dropped = store.history_partitions(term, 3600, 12 * 3600, 7200)
            removed = arguments.prune - int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])  # type: ignore[index]
            how = f"DROP of {sum(action == 'dropped' for action, _ in dropped)} partitions"
        else:
            removed = 0
            while pruned := store.prune(term, 12 * 3600, 14 * 86400, 5000):
                removed += pruned
            how = "job_prune, DELETE of 5,000 at a time"
        prune_seconds = time.perf_counter() - started
        assert removed == arguments.prune, (removed, arguments.prune)
        dead = table_figures(conn, "jobs" if layout == "0014_scale" else "jobs_done_default")
        started = time.perf_counter()
        conn.execute("VACUUM jobs, job_attempts")
        vacuum_seconds = time.perf_counter() - started
        emit("prune", rows=removed, how=how, seconds=round(prune_seconds, 3),
             dead_tuples_left=dead["dead_tuples"] if layout == "0014_scale" else 0,
             vacuum_after_seconds=round(vacuum_seconds, 3))  # fmt: skip
    if arguments.out:
        with open(arguments.out, "a", encoding="utf-8") as out:
            out.writelines(json.dumps(line) + "\n" for line in lines)


if __name__ == "__main__":
    main()
