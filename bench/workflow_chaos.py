"""The long SIGKILL run of issue 11: 200 five-step workflow executions (3 transaction steps
writing a ledger row, 2 external steps appending to a file) while worker.py processes are killed
with SIGKILL at random 100 times, on a PostgreSQL cluster of its own.

    .venv/bin/python -m bench.workflow_chaos [--executions 200] [--kills 100] [--pause 0.05]
        [--min-age 0] [--json FILE]

``--min-age S`` kills only workers at least S seconds old: a worker.py takes about a second to
start, so without it most kills land on a replacement still starting and few slices are hit.

Checks, and prints as JSON: every execution succeeded with the output of an uninterrupted run;
each transaction step's ledger row exists exactly once; external effects were repeated only for
steps in flight at a kill (at most one per slice in flight: a thread runs a group of up to
``SLICE_BATCH`` slices, so at most that many per thread per kill). The short version runs in the
suite (tests/workflows/test_workers.py).
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg

from bench.chaos import migrate
from devtools.cluster import Cluster
from tests.support.workflows import create_workflow_test_tables
from workflows import start_workflow
from workflows.runtime import SLICE_BATCH

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--lease", "2", "--heartbeat", "0.5", "--sweep", "0.2", "--poll", "0.1",
        "--leader-lease-seconds", "1"]  # fmt: skip


def spawn(url: str, threads: int, effects: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "worker.py", "--single", "--tasks", "tests.support.workflows",
         "--queues", f"workflows={threads}", *FAST],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "WF_EFFECTS_FILE": str(effects)},
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )  # fmt: skip


def run(
    executions: int, kills: int, workers: int, threads: int, pause: float, min_age: float
) -> dict[str, object]:
    folder = Path(tempfile.mkdtemp(prefix="pauta-workflow-chaos-"))
    effects = folder / "effects.txt"
    effects.touch()
    rng = random.Random(2026)
    with Cluster() as cluster:
        url = cluster.create_database("flows")
        migrate(url)
        with psycopg.connect(url, autocommit=True) as conn:
            create_workflow_test_tables(conn)
            ids = [
                start_workflow(conn, "five_steps", {"n": n, "pause": pause}).execution_id
                for n in range(executions)
            ]
            started = time.monotonic()
            live = [spawn(url, threads, effects, folder / "workers.log") for _ in range(workers)]
            born = {process.pid: time.monotonic() for process in live}
            for _ in range(kills):
                time.sleep(rng.uniform(0.05, 0.3))
                # With min_age, only a worker that has lived that long (past its start-up, so
                # likely running slices) is killed; the kill waits for one if none has.
                oldest = min(born[process.pid] for process in live)
                time.sleep(max(0.0, oldest + min_age - time.monotonic()))
                old = [n for n, process in enumerate(live)
                       if time.monotonic() - born[process.pid] >= min_age]  # fmt: skip
                victim = live.pop(rng.choice(old))
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                replacement = spawn(url, threads, effects, folder / "workers.log")
                born[replacement.pid] = time.monotonic()
                live.append(replacement)
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:
                done = conn.execute(
                    "SELECT count(*) FROM workflow_executions WHERE status = 'succeeded'"
                ).fetchone()
                if done and done[0] == executions:
                    break
                time.sleep(0.2)
            elapsed = time.monotonic() - started
            for process in live:
                process.send_signal(signal.SIGTERM)
            for process in live:
                process.wait(60)
            statuses = dict(
                conn.execute("SELECT status, count(*) FROM workflow_executions GROUP BY 1")
            )
            outputs = dict(conn.execute("SELECT id, output FROM workflow_executions"))
            exact = sum(
                outputs[eid] == {"n": n, "steps": [10, "2", 30, "4", 50]}
                for n, eid in enumerate(ids)
            )
            ledger = Counter(conn.execute("SELECT execution_id, step FROM wf_ledger").fetchall())
            expected = {(eid, step) for eid in ids for step in (1, 3, 5)}
            rescued = conn.execute(
                "SELECT count(*) FROM job_attempts WHERE outcome = 'lease_expired'"
            ).fetchone()
    lines = Counter(effects.read_text().split())
    repeats = sum(count - 1 for count in lines.values())
    result = {
        "executions": executions,
        "kills": kills,
        "workers": workers,
        "threads": threads,
        "min_age": min_age,
        "seconds": round(elapsed, 1),
        "statuses": statuses,
        "outputs_exact": exact,
        "ledger_rows_once": sum(1 for key in expected if ledger.get(key) == 1),
        "ledger_rows_expected": len(expected),
        "ledger_rows_extra": sum(ledger.values()) - len(expected),
        "external_effects_missing": sum(
            1 for eid in ids for step in (2, 4) if lines[f"{eid}:{step}"] == 0
        ),
        "external_effects_repeated": repeats,
        "repeat_bound": kills * threads * SLICE_BATCH,
        "slices_rescued": rescued[0] if rescued else 0,
    }
    result["ok"] = (
        statuses.get("succeeded") == executions
        and exact == executions
        and result["ledger_rows_once"] == len(expected)
        and result["ledger_rows_extra"] == 0
        and result["external_effects_missing"] == 0
        and repeats <= result["repeat_bound"]
    )
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.workflow_chaos", description=__doc__)
    parser.add_argument("--executions", type=int, default=200)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=3)
    parser.add_argument("--pause", type=float, default=0.05)
    parser.add_argument("--min-age", type=float, default=0.0,
                        help="kill only workers at least this many seconds old")  # fmt: skip
    parser.add_argument("--json", type=Path, help="also write the result to this file")
    args = parser.parse_args(argv)
    result = run(args.executions, args.kills, args.workers, args.threads, args.pause, args.min_age)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
