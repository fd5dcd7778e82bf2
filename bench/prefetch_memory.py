"""A worker's memory when its jobs carry big payloads: the peak RSS of a runner draining no-op
jobs of big payloads, at each prefetch cap given.

    DATABASE_URL=postgresql://... python -m bench.prefetch_memory [--jobs 1000]
        [--payload-bytes 200000] [--prefetch 50,500] [--prefetch-bytes N] [--rounds 2]
        [--before DIR]

On a scratch database of the server: ``--jobs`` jobs whose payloads hold ``--payload-bytes`` of
random text (which PostgreSQL cannot compress, so each is stored and sent at its size) are
enqueued, then drained by a runner (10 threads, one queue, ``worker.py --single``'s runner) in
a process of its own, once per cap and round, the caps taking turns within each round. Each
drain prints one JSON line: the runner's RSS before it started, its peak RSS (``VmHWM``) once
the queue is drained, and the drain's seconds. ``--prefetch-bytes`` is passed to the runner
when given (the runner's default otherwise). ``--before DIR`` also runs each cap in the
checkout DIR (its own defaults), as ``bench.before_after`` runs a checkout: in a process
started in that directory, with this interpreter. Linux only (``/proc``).
"""

import argparse
import base64
import json
import os
import secrets
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg

from bench.pages import scratch_database
from bench.profile_breakdown import migrate
from jobqueue import JobRequest, TaskRegistry, enqueue_many

HERE = Path(__file__).resolve().parent.parent
THREADS = 10
TASK = "bench_blob"
ENQUEUE_BATCH = 20  # jobs a statement: a fifth of the largest payloads' limit each

# Run with the checkout as the current directory (python -c puts it first on sys.path).
CHILD = """
import json, sys, time
import psycopg
from jobqueue import task
from jobqueue.runner import Runner
from jobqueue.settings import WorkerSettings

@task("bench_blob")
def bench_blob(seq, blob):
    pass

url, jobs, settings = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])

def status(field):
    with open("/proc/self/status") as lines:
        return next(int(line.split()[1]) for line in lines if line.startswith(field))

worker = WorkerSettings(database_url=url, maintenance=False, **settings)
worker.configure_interpreter()
before = status("VmRSS:")
runner = Runner(worker)
started = time.perf_counter()
runner.start()
with psycopg.connect(url, autocommit=True) as conn:
    query = "SELECT count(*) FROM jobs WHERE state = 'succeeded'"
    while conn.execute(query).fetchone()[0] < jobs:
        time.sleep(0.02)
took = time.perf_counter() - started
runner.stop()
print(json.dumps({"rss_before_kb": before, "peak_rss_kb": status("VmHWM:"), "drain_s": took}))
"""


def enqueue(url: str, jobs: int, payload_bytes: int) -> None:
    tasks = TaskRegistry()  # the task is the runner's; enqueue needs only its name
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE jobs CASCADE")
        for first in range(0, jobs, ENQUEUE_BATCH):
            requests = [
                JobRequest(TASK, {"seq": seq, "blob": _random_text(payload_bytes)})
                for seq in range(first, min(first + ENQUEUE_BATCH, jobs))
            ]
            enqueue_many(conn, requests, tasks=tasks)
        conn.execute("VACUUM ANALYZE jobs_live")


def _random_text(size: int) -> str:
    return base64.b64encode(secrets.token_bytes(size * 3 // 4)).decode()


def drain(checkout: Path, url: str, jobs: int, settings: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, url, str(jobs), json.dumps(settings)],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"the runner in {checkout} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.prefetch_memory", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--payload-bytes", type=int, default=200_000)
    parser.add_argument("--prefetch", default="50,500", help="caps to compare, e.g. 50,500")
    parser.add_argument("--prefetch-bytes", type=int, help="the runner's prefetch_bytes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--before", type=Path, help="another checkout to run each cap in")
    args = parser.parse_args(argv)
    try:
        caps = [int(cap) for cap in args.prefetch.split(",")]
    except ValueError:
        parser.error(f"--prefetch must be whole numbers separated by commas, not {args.prefetch!r}")
    if args.jobs < 1 or args.rounds < 1 or any(cap < 0 for cap in caps):
        parser.error("--jobs and --rounds must be at least 1, and each cap 0 or more")
    if not 2 <= args.payload_bytes <= 250_000:
        parser.error("--payload-bytes must be from 2 to 250,000 (enqueue refuses past 256 kB)")
    if args.before is not None and not (args.before / "jobqueue").is_dir():
        parser.error(f"--before {args.before} is not a checkout of this project")
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (a scratch database is made)")
    checkouts = [("this", HERE)] + ([("before", args.before)] if args.before else [])
    peaks: dict[tuple[str, int], list[int]] = {}
    with scratch_database(server) as url:
        migrate(url)
        for round_number in range(args.rounds):
            for name, checkout in checkouts:
                for cap in caps:
                    settings: dict[str, Any] = {"queues": {"default": THREADS}, "prefetch": cap}
                    if args.prefetch_bytes is not None and name == "this":
                        settings["prefetch_bytes"] = args.prefetch_bytes
                    enqueue(url, args.jobs, args.payload_bytes)
                    figures = drain(checkout, url, args.jobs, settings)
                    peaks.setdefault((name, cap), []).append(figures["peak_rss_kb"])
                    line = {"checkout": name, "round": round_number, **settings, **figures}
                    print(
                        json.dumps({**line, "jobs": args.jobs, "payload_bytes": args.payload_bytes})
                    )
    for (name, cap), values in peaks.items():
        summary = {
            "checkout": name,
            "prefetch": cap,
            "peak_rss_kb_median": statistics.median(values),
        }
        print(json.dumps({"summary": "median of rounds", **summary}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
