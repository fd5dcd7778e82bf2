"""A queue's rate limit at full size: 2,000 no-op jobs on a queue limited to 20 starts a second,
served by three `worker.py --single` processes of 8 threads each; prints the starts in every
whole 5-second window (from `started_at`) and whether each is within 10% of 100.

    DATABASE_URL=postgresql://... python -m bench.rate_limit [--jobs 2000] [--rate 20]

It works on a scratch database of that server (created, migrated and dropped).
tests/test_rate_limits.py runs the same with 400 jobs.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench.pages import scratch_database
from jobqueue import JobRequest, enqueue_many

ROOT = Path(__file__).resolve().parent.parent
WINDOW = 5.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.rate_limit", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rate", type=int, default=20)
    args = parser.parse_args(argv)
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit(
            "set DATABASE_URL to a PostgreSQL server the bench may create a database on"
        )
    with scratch_database(server) as url:
        environment = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": "bench"}
        subprocess.run(
            [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
            cwd=ROOT, env=environment, check=True, capture_output=True,
        )  # fmt: skip
        with psycopg.connect(url, autocommit=True) as conn:
            command = [
                sys.executable, "worker.py", "--single", "--queues", "limited=8",
                "--rate-limits", f"limited={args.rate}/s",
            ]  # fmt: skip
            workers = [
                subprocess.Popen(command, cwd=ROOT, env=environment, stderr=subprocess.DEVNULL)
                for _ in range(3)
            ]
            try:
                time.sleep(10)  # the three are up before the jobs come: windows measure three
                enqueue_many(conn, [JobRequest("noop", queue="limited")] * args.jobs)
                while _count(conn, "state = 'succeeded'") < args.jobs:
                    time.sleep(0.5)
            finally:
                for worker in workers:
                    worker.send_signal(signal.SIGTERM)
                for worker in workers:
                    worker.wait(60)
            report = _windows(conn, args.rate)
    print(json.dumps({"metric": "rate limit", "jobs": args.jobs, **report}))
    return 0 if report["met"] else 1


def _count(conn: psycopg.Connection, where: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM jobs WHERE {where}").fetchone()
    return int(row[0]) if row else 0


def _windows(conn: psycopg.Connection, rate: int) -> dict[str, object]:
    first, last = conn.execute("SELECT min(started_at), max(started_at) FROM jobs").fetchone()  # type: ignore[misc]
    rows = conn.execute(
        "SELECT floor(extract(epoch FROM started_at - %s) / %s)::int FROM jobs", (first, WINDOW)
    ).fetchall()
    counted = Counter(row[0] for row in rows)
    whole = int((last - first).total_seconds() // WINDOW)
    windows = [counted.get(window, 0) for window in range(whole)]
    goal = rate * WINDOW
    worst = max((abs(count - goal) / goal for count in windows), default=0.0)
    seconds = (last - first).total_seconds()
    return {
        "limit_per_s": rate,
        "observed_per_s": round(len(rows) / seconds, 2) if seconds else None,
        "per_5s": windows,
        "worst_deviation": round(worst, 3),
        "met": bool(windows) and worst <= 0.10,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
