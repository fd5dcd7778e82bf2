"""What 10,000 executions waiting on an approval cost (issue 11): a worker's threads,
connections and memory, and the console's executions list over them.

    DATABASE_URL=postgresql://... .venv/bin/python -m bench.workflow_idle \\
        [--executions 10000] [--minutes 3] [--requests 30] [--json FILE]

On a scratch database of the server named by DATABASE_URL: one ``worker.py --single --queues
workflows=4`` runs ``approval`` executions (tests/support/workflows.py: a transaction step,
then ``ctx.wait_for("approval")`` with no timeout) until they all wait. Its threads (/proc), its
connections (pg_stat_activity, by state) and its resident memory (VmRSS) are taken when it is
ready, after a warm-up of 300 parked executions, after all are parked, and every 30 s for
``--minutes`` after that. Then the console's executions list is requested through the Flask test
client as a logged-in platform admin (p50, p95, max against 200 ms), with EXPLAIN ANALYZE of
the list and overview queries. Prints one JSON document.
"""

import argparse
import json
import secrets
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg

from bench.pages import logged_in_client, scratch_app, timed
from bench.workflows import start_worker, stop
from tests.support.workflows import create_workflow_test_tables
from workflows import start_workflow
from workflows.store import all_queries

THREADS = 4
TARGET_MS = 200.0
WAITING = (
    "SELECT count(*) FROM workflow_executions AS e JOIN workflow_waits AS w"
    " ON w.execution_id = e.id AND w.satisfied_at IS NULL"
    " WHERE e.status = 'waiting' AND w.key = 'approval'"
)


def prepare(app: Any, url: str) -> tuple[str, str]:
    """Migrate, add a platform admin and the test workflows' table; the admin's credentials."""
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
    with psycopg.connect(url, autocommit=True) as conn:
        create_workflow_test_tables(conn)
    return "admin@bench.example", password


def footprint(conn: psycopg.Connection[Any], pid: int) -> dict[str, Any]:
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    states = Counter(
        row[0]
        for row in conn.execute(
            "SELECT state FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
    )
    return {
        "waiting": int(conn.execute(WAITING).fetchone()[0]),  # type: ignore[index]
        "threads": len(list(Path(f"/proc/{pid}/task").iterdir())),
        "connections": sum(states.values()),
        "connections_by_state": dict(states),
        "rss_mib": round(rss / 1024, 1),
    }


def park(conn: psycopg.Connection[Any], executions: int) -> float:
    """Start ``executions`` approvals (1,000 per transaction) and wait until all wait; returns
    the seconds from the first start to the last one parked."""
    before = int(conn.execute(WAITING).fetchone()[0])  # type: ignore[index]
    started = time.perf_counter()
    for first in range(0, executions, 1000):
        with conn.transaction():
            for _ in range(min(1000, executions - first)):
                start_workflow(conn, "approval", {"timeout": None})
    while int(conn.execute(WAITING).fetchone()[0]) < before + executions:  # type: ignore[index]
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    while conn.execute("SELECT count(*) FROM jobs WHERE state = 'running'").fetchone() != (0,):
        time.sleep(0.05)  # the last slices' job results
    return elapsed


def explain(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> dict[str, Any]:
    sql = all_queries()[query].sql
    for _ in range(3):
        conn.execute(sql, params).fetchall()
    plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params).fetchone()
    top = plan[0][0]  # type: ignore[index]
    return {
        "execution_ms": round(top["Execution Time"], 3),
        "planning_ms": round(top["Planning Time"], 3),
        "shared_pages": top["Plan"]["Shared Hit Blocks"] + top["Plan"]["Shared Read Blocks"],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.workflow_idle", description=__doc__)
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"executions": args.executions, "threads": THREADS}
    with scratch_app() as (app, url):
        email, password = prepare(app, url)
        with psycopg.connect(url, autocommit=True) as conn:
            worker, _ = start_worker(url, THREADS)
            try:
                time.sleep(2)  # its first heartbeat and maintenance pass
                result["ready"] = footprint(conn, worker.pid)
                park(conn, 300)
                result["after_300"] = footprint(conn, worker.pid)
                seconds = park(conn, args.executions - 300)
                result["parked_per_second"] = round((args.executions - 300) / seconds, 1)
                result["after_all"] = footprint(conn, worker.pid)
                samples = []
                deadline = time.monotonic() + args.minutes * 60
                while time.monotonic() < deadline:
                    time.sleep(min(30.0, max(0.0, deadline - time.monotonic())))
                    samples.append(footprint(conn, worker.pid))
                result["over_time"] = samples
            finally:
                stop(worker)
            conn.execute("ANALYZE")
            tenant = None
            page = {"tenant_id": tenant, "status": "waiting", "name": None,
                    "waiting_on": "approval", "started_from": None, "started_to": None,
                    "before": None, "limit": 51}  # fmt: skip
            result["explain_list_waiting_on_approval"] = explain(
                conn, "console_execution_list", page
            )
            result["explain_overview_counts"] = explain(
                conn, "console_workflow_counts", {"tenant_id": None}
            )
            ids = "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY id) FROM workflow_executions"
            middle = int(conn.execute(ids).fetchone()[0])  # type: ignore[index]
        client = logged_in_client(app, email, password)
        pages = {}
        filtered = "/workflows/?status=waiting&waiting_on=approval"
        for path in (filtered, "/workflows/", f"{filtered}&before={middle}"):
            times = sorted(timed(client, path, args.requests))
            pages[path] = {
                "p50_ms": round(times[len(times) // 2], 1),
                "p95_ms": round(times[max(0, round(0.95 * len(times)) - 1)], 1),
                "max_ms": round(times[-1], 1),
                "requests": len(times),
                "target_ms": TARGET_MS,
            }
        result["console_list"] = pages
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
