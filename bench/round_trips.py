"""What one round trip costs on this machine, in CPU, on each side of the socket.

    .venv-bench/bin/python -m devtools.database .venv-bench/bin/python -m bench.round_trips \\
        [--calls 20000] [--rounds 2]

One psycopg connection in autocommit mode sends, one at a time: an empty query (a round trip
and nothing else), ``SELECT 1`` (prepared after the first calls, as psycopg does), and a one-row
``UPDATE`` of a temporary table with its commit. For each: the wall time a call, the CPU time
of this process (the client: psycopg, libpq, the socket's system calls) and of the server's
backend process (read from /proc: the server must run on this machine) a call. One JSON line
per statement and round.

It calibrates what a workflow slice's round trips cost before any work of their own (see
docs/benchmarks.md, "2026-12-03"): the engine's batched claim and result pay these once for
many jobs, a slice pays them at every step boundary.
"""

import argparse
import json
import os
import sys
import time
from typing import Any

import psycopg

from bench.machine import cpu_seconds

STATEMENTS = (
    ("empty query", ""),
    ("SELECT 1", "SELECT 1"),
    ("one-row UPDATE and its commit", "UPDATE bench_round_trip SET hits = hits + 1 WHERE id = 1"),
)
WARM_UP = 200


def measure(url: str, calls: int, rounds: int) -> list[dict[str, Any]]:
    with psycopg.connect(url, autocommit=True) as conn:
        # a logged table: its commit flushes the WAL, as a checkpoint's does (a temporary
        # table's would not)
        conn.execute("CREATE TABLE bench_round_trip (id int PRIMARY KEY, hits int NOT NULL)")
        try:
            conn.execute("INSERT INTO bench_round_trip VALUES (1, 0)")
            lines = _rounds(conn, calls, rounds)
        finally:
            conn.execute("DROP TABLE bench_round_trip")
    return lines


def _rounds(conn: psycopg.Connection[Any], calls: int, rounds: int) -> list[dict[str, Any]]:
    lines = []
    backend = conn.info.backend_pid
    for round_number in range(1, rounds + 1):
        for label, sql in STATEMENTS:
            for _ in range(WARM_UP):
                conn.execute(sql)
            server, client = cpu_seconds(backend), time.process_time()
            started = time.perf_counter()
            for _ in range(calls):
                conn.execute(sql)
            wall = time.perf_counter() - started
            lines.append(
                {
                    "statement": label,
                    "round": round_number,
                    "calls": calls,
                    "wall_us": round(wall / calls * 1e6, 1),
                    "client_cpu_us": round((time.process_time() - client) / calls * 1e6, 1),
                    "server_cpu_us": round((cpu_seconds(backend) - server) / calls * 1e6, 1),
                }
            )
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=20_000, help="calls per statement a round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        parser.error("--calls and --rounds must be at least 1")
    url = os.environ.get("DATABASE_URL")
    if not url:
        parser.error("set DATABASE_URL to the server to measure (it must run on this machine)")
    for line in measure(url, args.calls, args.rounds):
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
