"""One slice's step boundary alone: ``step_guard`` against ``step_guard_many`` given one row.

    .venv-bench/bin/python -m devtools.database .venv-bench/bin/python -m bench.boundary_alone \\
        [--executions 2000] [--rounds 2]

A slice that runs alone (a group of one, or a boundary inside a transaction step) writes its
boundary with ``step_guard``; a group writes all of its slices' with ``step_guard_many``, whose
rows come as one JSON value. Routing the lone boundary through the group's statement would leave
one statement instead of two: this measures what that would cost the lone slice.

In a fresh database on the server DATABASE_URL names (migrated), two-step executions are
started and their slice jobs claimed by one worker name; each execution then gets both of its
boundaries (the first step's checkpoint, then the second's with the end) from one statement or
the other, ``--executions`` of them per statement and round. Reported per boundary, one JSON
line per statement and round: the wall time (mean and median), this process's CPU and the
server backend's (read from /proc: the server must run on this machine).
"""

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

from bench.machine import cpu_seconds

WORKER = "bench-boundary"


def measure(executions: int, rounds: int) -> list[dict[str, Any]]:
    import tests.support.workflows  # noqa: F401 - registers two_noops
    from bench.chaos import migrate
    from bench.workflows import fresh_database
    from jobqueue.store import JobStore
    from workflows import start_workflow
    from workflows.store import Boundary, Checkpoint, End, Fence, WorkflowStore

    url = fresh_database("bench_boundary_alone")
    migrate(url)
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            for _ in range(2 * executions * rounds):
                start_workflow(conn, "two_noops")
        jobs = JobStore(conn).claim("workflows", 2 * executions * rounds, WORKER, 3600.0, True)
        store = WorkflowStore(conn)

        def alone(execution: int, fence: Fence, held: Checkpoint, end: End | None) -> None:
            store.guard(execution, fence, held, end)

        def many(execution: int, fence: Fence, held: Checkpoint, end: End | None) -> None:
            store.guard_many([Boundary(store, execution, fence, held, end)])

        ways: dict[str, Callable[[int, Fence, Checkpoint, End | None], None]] = {
            "step_guard": alone,
            "step_guard_many, one row": many,
        }
        lines = []
        backend = conn.info.backend_pid
        for round_number in range(rounds):
            for n, (label, write) in enumerate(ways.items()):
                first_job = (2 * round_number + n) * executions
                part = jobs[first_job : first_job + executions]
                times = []
                server, client = cpu_seconds(backend), time.process_time()
                for job in part:
                    now = time.time()
                    fence = Fence(job.id, job.attempt, WORKER)
                    execution = job.payload["execution_id"]
                    first = Checkpoint(0, "noop", "step", None, None, 1, now, now)
                    second = Checkpoint(1, "noop", "step", None, None, 1, now, now)
                    started = time.perf_counter()
                    write(execution, fence, first, None)
                    write(execution, fence, second, End("succeeded", None, None))
                    times.append((time.perf_counter() - started) / 2)
                boundaries = 2 * len(part)
                lines.append(
                    {
                        "statement": label,
                        "round": round_number + 1,
                        "boundaries": boundaries,
                        "wall_us_mean": round(statistics.fmean(times) * 1e6, 1),
                        "wall_us_median": round(statistics.median(times) * 1e6, 1),
                        "client_cpu_us": round(
                            (time.process_time() - client) / boundaries * 1e6, 1
                        ),
                        "server_cpu_us": round(
                            (cpu_seconds(backend) - server) / boundaries * 1e6, 1
                        ),
                    }
                )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--executions", type=int, default=2000, help="per statement a round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.executions < 1 or args.rounds < 1:
        parser.error("--executions and --rounds must be at least 1")
    if not os.environ.get("DATABASE_URL"):
        parser.error("set DATABASE_URL to a server on this machine")
    for line in measure(args.executions, args.rounds):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
