"""How fast the jobs console answers on a big table: 1,000,000 finished jobs and 100,000 waiting.

    DATABASE_URL=postgresql://... .venv/bin/python -m bench.console_pages [--requests 30]

Creates a scratch database on the server named by DATABASE_URL, migrates it, and fills it on the
server with ``INSERT ... SELECT generate_series``: four queues, four tenants; 1,000,000 finished
jobs over the last two weeks (96% succeeded, 3% dead with five kinds of error, 1% cancelled),
100,000 waiting (a tenth of them scheduled for later), 200 running; attempt rows for every dead
job (three each) and for 50,000 succeeded ones; seven days of per-minute stats and depth samples
for every queue and tenant; a supervisor with four children. Then ``VACUUM ANALYZE``, as
autovacuum would soon do.

Then it requests each console page and JSON endpoint through the Flask test client as a
logged-in platform admin (the whole request: routing, session, queries, templates) and prints
one JSON line per page with p50, p95 and max in milliseconds against the 200 ms target. Drops
the database at the end.
"""

import argparse
import json
import secrets
import sys
import time
from typing import Any

import psycopg

from bench.pages import logged_in_client, report, scratch_app, timed

TARGET_MS = 200.0
FINISHED = 1_000_000
WAITING = 100_000

FILL = [
    "INSERT INTO tenants (slug, name) SELECT 'tenant' || g, 'Tenant ' || g"
    " FROM generate_series(1, 3) AS g",
    # Finished jobs, oldest first: ids grow with time, as they do in production.
    f"""
    INSERT INTO jobs (tenant_id, queue, task, payload, state, attempt, max_attempts, available_at,
                      created_at, started_at, finished_at, last_error)
    SELECT 1 + g % 4, (ARRAY['default', 'mail', 'reports', 'billing'])[1 + g % 4],
           (ARRAY['hr.notify_reviewer', 'noop', 'reports.build', 'billing.sync'])[1 + g % 4],
           jsonb_build_object('cycle_id', g % 1000, 'reviewer_id', g, 'note', 'bench ' || g),
           CASE WHEN g % 100 < 3 THEN 'dead' WHEN g % 100 = 3 THEN 'cancelled'
                ELSE 'succeeded' END,
           CASE WHEN g % 100 < 3 THEN 3 ELSE 1 END, 3, at, at, at, at + interval '2 seconds',
           CASE WHEN g % 100 < 3 THEN (ARRAY[
               'SMTPRecipientsRefused: 550 5.1.1 <user' || g || '@example.com> unknown',
               'TimeoutError: job ' || g || ' timed out after 30.0s',
               'ConnectionError: connection to smtp-' || g % 7 || ' refused',
               'KeyError: ''reviewer_id''',
               'LeaseExpired: worker web-0' || g % 3 || ':' || g || ':a1b2c3 stopped renewing'
           ])[1 + (g / 100) % 5] END
    FROM generate_series(1, {FINISHED}) AS g,
         LATERAL (SELECT now() - interval '14 days' + g * interval '14 days' / {FINISHED}) AS t(at)
    """,
    f"""
    INSERT INTO jobs (tenant_id, queue, task, payload, available_at, created_at)
    SELECT 1 + g % 4, (ARRAY['default', 'mail', 'reports', 'billing'])[1 + g % 4], 'noop',
           jsonb_build_object('cycle_id', g % 1000, 'n', g),
           CASE WHEN g % 10 = 0 THEN now() + g * interval '1 second'
                ELSE now() - interval '10 minutes' END,
           now() - interval '10 minutes'
    FROM generate_series(1, {WAITING}) AS g
    """,
    """
    UPDATE jobs SET state = 'running', attempt = 1, started_at = now(),
                    locked_by = 'bench:' || (id % 4) || ':abcdef',
                    lease_expires_at = now() + interval '30 seconds'
    WHERE id IN (SELECT id FROM jobs WHERE state = 'available' ORDER BY id DESC LIMIT 200)
    """,
    """
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              traceback, duration)
    SELECT id, n, 'bench:1:abcdef', finished_at - interval '2 seconds', finished_at,
           'failed', last_error, 'Traceback (most recent call last):' || repeat(E'\n  ...', 20),
           interval '1.5 seconds'
    FROM jobs, generate_series(1, 3) AS n WHERE state = 'dead'
    """,
    """
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, duration)
    SELECT id, 1, 'bench:1:abcdef', started_at, finished_at, 'succeeded', interval '0.2 seconds'
    FROM jobs WHERE state = 'succeeded' AND id % 20 = 0
    """,
    """
    INSERT INTO job_stats_minute (queue, minute, tenant_id, succeeded, failed, dead, released,
                                  runtime_sum, runtime_max, wait_sum, wait_max)
    SELECT queue, minute, tenant, 60 + tenant, 2, 1, 0, 12.0, 0.9, 3.0, 0.5
    FROM unnest(ARRAY['default', 'mail', 'reports', 'billing']) AS queue,
         generate_series(1, 4) AS tenant,
         generate_series(date_trunc('minute', now()) - interval '7 days',
                         date_trunc('minute', now()), interval '1 minute') AS minute
    """,
    """
    INSERT INTO queue_depth_minute (queue, minute, tenant_id, available, scheduled, running, dead,
                                    oldest_available_seconds)
    SELECT queue, minute, tenant, 22000, 2500, 50, 7500, 600
    FROM unnest(ARRAY['default', 'mail', 'reports', 'billing']) AS queue,
         generate_series(1, 4) AS tenant,
         generate_series(date_trunc('minute', now()) - interval '7 days',
                         date_trunc('minute', now()), interval '1 minute') AS minute
    """,
    "INSERT INTO workers (name, hostname, pid, queue, threads) VALUES ('bench:1:supervisor',"
    " 'bench', 1, NULL, 16)",
    """
    INSERT INTO workers (name, hostname, pid, parent_id, queue, threads)
    SELECT 'bench:' || (g + 1) || ':abcdef', 'bench', g + 1, 1,
           (ARRAY['default', 'mail', 'reports', 'billing'])[g], 4
    FROM generate_series(1, 4) AS g
    """,
]


def build(app: Any, url: str) -> tuple[str, str]:
    """Migrate and fill the database; returns a platform admin's (e-mail, password)."""
    from flask_migrate import upgrade

    from hr.accounts import create_user
    from models import Tenant, db
    from models.people import Role

    with app.app_context():
        upgrade()
        system = db.session.query(Tenant).filter_by(slug="system").one()
        password = secrets.token_urlsafe(16)
        create_user(db.session, tenant=system, email="admin@bench.example", name="Admin",
                    role=Role.PLATFORM_ADMIN, password=password)  # fmt: skip
        db.session.commit()
        db.engine.dispose()
    started = time.perf_counter()
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in FILL:
            conn.execute(statement)  # type: ignore[arg-type]
        conn.execute("VACUUM ANALYZE")
        counts = dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY 1").fetchall())
    print(f"built in {time.perf_counter() - started:.0f} s: {json.dumps(counts)}", file=sys.stderr)
    return "admin@bench.example", password


def samples(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Ids and a fingerprint to put in the pages' URLs."""
    dead = conn.execute("SELECT max(id) FROM jobs WHERE state = 'dead'").fetchone()
    middle = conn.execute("SELECT max(id) / 2 FROM jobs").fetchone()
    group = conn.execute(
        "SELECT md5(task || E'\\n' || job_error_pattern(last_error)) FROM jobs"
        " WHERE state = 'dead' ORDER BY id DESC LIMIT 1"
    ).fetchone()
    assert dead and middle and group
    return {"dead": dead[0], "middle": middle[0], "fingerprint": group[0]}


def pages(ids: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        ("overview", "/queues/"),
        ("overview_one_tenant", "/queues/?tenant=tenant2"),
        ("live_figures_json", "/metrics/figures.json"),
        ("live_figures_json_one_tenant", "/metrics/figures.json?tenant=tenant2"),
        ("queue_detail", "/queues/mail"),
        ("series_json_1h", "/metrics/series.json?queue=mail&window=1h"),
        ("series_json_7d", "/metrics/series.json?queue=mail&window=7d"),
        ("jobs_first_page", "/jobs/"),
        ("jobs_later_page", f"/jobs/?before={ids['middle']}"),
        ("jobs_dead_in_a_queue", "/jobs/?state=dead&queue=mail"),
        ("jobs_waiting_one_tenant", "/jobs/?state=available&tenant=tenant3"),
        ("jobs_payload_value", "/jobs/?payload=cycle_id%3D8&queue=default"),
        ("jobs_error_text", "/jobs/?error=timed+out"),
        ("job_page", f"/jobs/{ids['dead']}"),
        ("failures", "/failures/"),
        ("failure_group", f"/failures/{ids['fingerprint']}"),
        ("scheduled", "/scheduled/"),
        ("workers", "/workers/"),
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.console_pages", description=__doc__)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args(argv)
    with scratch_app() as (app, url):
        email, password = build(app, url)
        with psycopg.connect(url) as conn:
            ids = samples(conn)
        client = logged_in_client(app, email, password)
        verdicts = [report(name, timed(client, path, args.requests), TARGET_MS, path=path)
                    for name, path in pages(ids)]  # fmt: skip
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
