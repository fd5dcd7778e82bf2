"""Pauta through its supervisor: `worker.py` with one queue, so one child process runs the jobs.

Compared with bench.pauta_system (the bare runner) it adds what a deployment really runs: the
supervisor, its registry heartbeats and maintenance, and the child's process boundary.
"""

import argparse
import os
import sys
from typing import ClassVar

from bench.pauta_system import EVENTS, RECORD_ALL, ROOT
from bench.pauta_system import Peer as BareRunnerPeer


class Peer(BareRunnerPeer):
    PROFILES: ClassVar[dict[str, str]] = {"defaults": BareRunnerPeer.PROFILES["defaults"]}
    name = "pauta-supervisor"


def run_supervisor() -> None:
    """Become `worker.py` (exec), so the benchmark's SIGTERM reaches the supervisor itself."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--record", choices=("first", "all"), required=True)
    parser.add_argument("--profile", choices=("defaults",), default="defaults")
    args = parser.parse_args()
    environment = {
        **os.environ,
        "DATABASE_URL": args.dsn,
        EVENTS: args.events,
        RECORD_ALL: "1" if args.record == "all" else "0",
    }
    command = [
        sys.executable,
        str(ROOT / "worker.py"),
        "--queues",
        f"default={args.concurrency}",
        "--tasks",
        "bench.pauta_system",
    ]
    os.execve(sys.executable, command, environment)


if __name__ == "__main__":
    run_supervisor()
