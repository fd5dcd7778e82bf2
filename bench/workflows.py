"""Two-step no-op workflows: Pauta against DBOS Transact, same run, same server (issue 11).

    .venv-bench/bin/python -m devtools.database .venv-bench/bin/python -m bench.workflows \\
        [--workflows 2000] [--threads 4 16] [--json FILE]

Each system gets a fresh database on the server named by DATABASE_URL and runs N workflows of
two no-op steps, started one per transaction by a producer while its workers run:

* Pauta: ``start_workflow`` (tests/support/workflows.py ``two_noops``) into one ``worker.py
  --single --queues workflows=T`` process, once per ``--threads`` value; also, for scale, N
  no-op jobs (``noop``) drained by the same worker settings.
* Pauta with ``--relaxed``: the same with ``two_noops_relaxed``, a workflow registered with
  ``relaxed_durability=True`` (its slices commit with ``synchronous_commit = off``), in rows of
  its own.
* DBOS Transact: ``Queue.enqueue`` of a ``@DBOS.workflow`` calling two ``@DBOS.step``s, in
  the one process that also executes them (DBOS's queue with its defaults: 1 s polling).

With ``--statements``, the Pauta runs use a private cluster of their own (``devtools.cluster``,
production settings, ``pg_stat_statements`` loaded) instead of DATABASE_URL's server, and report
each statement's share of a workflow in the workflow drain, and of a job in the no-op drain:
calls, execution time and WAL records per item (the counters are reset when the worker starts
and read when the last item is done).

With ``--cluster``, every system runs on such a private cluster, without ``pg_stat_statements``:
the production settings' autovacuum, where DATABASE_URL's server may run without it (this
machine's runs with autovacuum off). A private cluster starts with 48 WAL segments written and
recycled (``Cluster.recycle_wal``), as a server that has been running has them: a fresh one
zero-fills each new 16 MB segment while every commit waits, a stall of 10-20 ms about every
1.6 s of a workflow drain here, which alone set the step p99 of some runs.

With ``--wait-events``, a thread samples ``pg_stat_activity`` every 10 ms during each Pauta
drain and reports what the database's sessions were doing: each statement's share of the
active samples, by wait event (``cpu`` when waiting on none). The sampling costs the server
time of its own, so take the rates from a run without it.

Reported: workflows per second from the first start to the last completion, and the
step-to-step latency (the second step's completion minus the first's, from each system's own
step table), p50 and p99. For Pauta also the CPU a workflow (and a no-op job) cost: the worker
process's, and the server processes' connected to the database (read from /proc: the server must
run on this machine), over the drain, divided by the count.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
SERVER = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def url_for(database: str) -> str:
    return make_url(SERVER).set(database=database).render_as_string(hide_password=False)


def fresh_database(name: str) -> str:
    with psycopg.connect(url_for("postgres"), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {name}")
    return url_for(name)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def wait_for(conn: psycopg.Connection[Any], sql: str, expected: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        row = conn.execute(sql).fetchone()
        if row is not None and row[0] >= expected:
            return
        time.sleep(0.05)  # a count every 5 ms took a sixth of the server's time in the drain
    raise TimeoutError(f"{sql!r} did not reach {expected}")


def process_cpu(pid: int) -> float:
    """Seconds of CPU (user and system) process ``pid`` has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def backends_cpu(conn: psycopg.Connection[Any]) -> dict[int, float]:
    """CPU seconds of each server process connected to this database but ``conn``'s (the server
    runs on this machine); none when its processes cannot be read."""
    found = {}
    for (pid,) in conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid()"
    ):
        try:
            found[pid] = process_cpu(pid)
        except OSError:
            continue
    return found


class Meter:
    """CPU of a worker process and of its server processes over a drain, per item drained."""

    def __init__(self, conn: psycopg.Connection[Any], pid: int) -> None:
        self.conn, self.pid = conn, pid
        self.worker, self.server = process_cpu(pid), backends_cpu(conn)

    def per_item_ms(self, items: int) -> dict[str, float]:
        worker = process_cpu(self.pid) - self.worker
        now = backends_cpu(self.conn)
        server = sum(seconds - self.server.get(pid, 0.0) for pid, seconds in now.items())
        return {"worker_cpu_ms": 1000 * worker / items, "server_cpu_ms": 1000 * server / items}


class WaitEvents:
    """Samples what the sessions connected to a database are doing, from a thread of its own,
    until stopped: (statement's beginning, wait event) -> samples."""

    SQL = (
        "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 72),"
        " coalesce(wait_event_type || ':' || wait_event, 'cpu')"
        " FROM pg_stat_activity WHERE datname = current_database() AND state = 'active'"
        " AND pid <> pg_backend_pid()"
    )

    def __init__(self, url: str, interval: float = 0.010) -> None:
        self.url, self.interval = url, interval
        self.samples: Counter[tuple[str, str]] = Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "WaitEvents":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(self.interval):
                for statement, wait in conn.execute(self.SQL):
                    self.samples[statement, wait] += 1

    def top(self, count: int = 12) -> list[dict[str, Any]]:
        total = sum(self.samples.values()) or 1
        return [
            {"statement": statement, "wait": wait, "share": round(samples / total, 3)}
            for (statement, wait), samples in self.samples.most_common(count)
        ]


class Statements:
    """The statements the server ran for a database over a drain, per item drained, from
    ``pg_stat_statements`` (which the server must load)."""

    SQL = """
        SELECT calls, total_exec_time, wal_records, wal_bytes,
               left(regexp_replace(query, '\\s+', ' ', 'g'), 72)
        FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
        ORDER BY total_exec_time DESC
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("SELECT pg_stat_statements_reset()")

    def per_item(self, items: int, count: int = 8) -> list[dict[str, Any]]:
        return [
            {
                "statement": statement,
                "calls_per_item": round(calls / items, 3),
                "exec_us_per_item": round(1000 * exec_ms / items, 1),
                "exec_us_per_call": round(1000 * exec_ms / calls, 1),
                "wal_records_per_item": round(records / items, 2),
                "wal_bytes_per_item": round(int(wal_bytes) / items),
            }
            for calls, exec_ms, records, wal_bytes, statement in self.conn.execute(self.SQL)
        ][:count]


def start_worker(url: str, threads: int) -> tuple[subprocess.Popen[str], float]:
    """worker.py on the workflows queue (its log read, and dropped, by a thread); returns it and
    the time it said it was ready."""
    worker = subprocess.Popen(
        [sys.executable, "worker.py", "--single", "--tasks", "tests.support.workflows",
         "--queues", f"workflows={threads}"],
        cwd=ROOT, env={**os.environ, "DATABASE_URL": url},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    ready = threading.Event()

    def read() -> None:
        assert worker.stderr is not None
        for line in worker.stderr:
            if "ready; queues" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(60):
        raise RuntimeError("worker.py did not start")
    return worker, time.perf_counter()


def stop(worker: subprocess.Popen[str]) -> None:
    worker.terminate()
    worker.wait(60)


def pauta(
    workflows: int,
    threads: int,
    name: str = "two_noops",
    wait_events: bool = False,
    statements: bool = False,
) -> dict[str, Any]:
    import tests.support.workflows  # noqa: F401 - registers two_noops and two_noops_relaxed
    from bench.chaos import migrate
    from jobqueue import JobRequest, enqueue_many
    from workflows import start_workflow

    url = fresh_database("bench_pauta_workflows")
    migrate(url)
    result: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():  # started untimed, then drained: the drain is what is timed
            for _ in range(workflows):
                start_workflow(conn, name)
        counters = Statements(conn) if statements else None
        worker, ready = start_worker(url, threads)
        meter = Meter(conn, worker.pid)
        with WaitEvents(url) if wait_events else nullcontext() as sampler:
            wait_for(conn, "SELECT count(*) FROM workflow_executions WHERE status = 'succeeded'",
                     workflows, 600)  # fmt: skip
        elapsed = time.perf_counter() - ready
        if counters is not None:
            result["statements"] = counters.per_item(workflows)
        if sampler is not None:
            result["wait_events"] = sampler.top()
        cpu = meter.per_item_ms(workflows)
        stop(worker)
        gaps = [
            row[0] * 1000
            for row in conn.execute(
                "SELECT extract(epoch FROM b.finished_at - a.finished_at)::float8"
                " FROM operation_outputs a JOIN operation_outputs b"
                " ON b.execution_id = a.execution_id AND b.step_id = 1 WHERE a.step_id = 0"
            )
        ]
        result["workflows_per_second"] = workflows / elapsed
        result["step_latency_ms_p50"] = statistics.median(gaps)
        result["step_latency_ms_p99"] = percentile(gaps, 0.99)
        result["cpu_ms_per_workflow"] = cpu
        # The same worker settings draining as many no-op jobs.
        enqueue_many(conn, [JobRequest("noop", queue="workflows") for _ in range(workflows)])
        counters = Statements(conn) if statements else None
        worker, ready = start_worker(url, threads)
        meter = Meter(conn, worker.pid)
        with WaitEvents(url) if wait_events else nullcontext() as sampler:
            wait_for(conn, "SELECT count(*) FROM jobs WHERE task = 'noop' AND state = 'succeeded'",
                     workflows, 600)  # fmt: skip
        result["noop_jobs_per_second"] = workflows / (time.perf_counter() - ready)
        if counters is not None:
            result["noop_statements"] = counters.per_item(workflows)
        if sampler is not None:
            result["noop_wait_events"] = sampler.top()
        result["cpu_ms_per_noop_job"] = meter.per_item_ms(workflows)
        stop(worker)
    return result


def dbos(workflows: int) -> dict[str, Any]:
    url = fresh_database("bench_dbos_workflows")
    script = f"""
import time
from dbos import DBOS
DBOS(config={{"name": "bench", "system_database_url": {url!r}}})

@DBOS.step()
def noop() -> None:
    return None

@DBOS.workflow()
def two_noops() -> None:
    noop()
    noop()

DBOS.launch()
queue = DBOS.register_queue("bench")
started = time.perf_counter()
handles = [queue.enqueue(two_noops) for _ in range({workflows})]
for handle in handles:
    handle.get_result()
print(time.perf_counter() - started, flush=True)
DBOS.destroy()
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=1200, cwd="/tmp")  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    elapsed = float(done.stdout.strip().splitlines()[-1])
    with psycopg.connect(url, autocommit=True) as conn:
        gaps = [
            float(row[0])
            for row in conn.execute(
                "SELECT b.completed_at_epoch_ms - a.completed_at_epoch_ms"
                " FROM dbos.operation_outputs a JOIN dbos.operation_outputs b"
                " ON b.workflow_uuid = a.workflow_uuid AND b.function_id = 2"
                " WHERE a.function_id = 1"
            )
        ]
    from importlib.metadata import version

    return {
        "version": version("dbos"),
        "workflows_per_second": workflows / elapsed,
        "step_latency_ms_p50": statistics.median(gaps) if gaps else None,
        "step_latency_ms_p99": percentile(gaps, 0.99) if gaps else None,
    }


@contextmanager
def private_server(statements: bool) -> Iterator[None]:
    """Point this module at a private cluster of production settings (devtools.cluster:
    autovacuum on), with pg_stat_statements loaded for ``statements``, while it runs."""
    global SERVER
    from devtools.cluster import Cluster

    settings = (
        {"shared_preload_libraries": "'pg_stat_statements'", "pg_stat_statements.track": "top"}
        if statements
        else {}
    )
    shared = SERVER
    with Cluster(settings) as cluster:
        cluster.recycle_wal()
        SERVER = cluster.url()
        try:
            yield
        finally:
            SERVER = shared


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.workflows", description=__doc__)
    parser.add_argument("--workflows", type=int, default=2000)
    parser.add_argument("--threads", type=int, nargs="+", default=[4],
                        help="Pauta's worker threads; one Pauta run per value")  # fmt: skip
    parser.add_argument("--only", choices=("pauta", "dbos"))
    parser.add_argument("--relaxed", action="store_true",
                        help="also Pauta's opt-in relaxed durability (its own rows)")  # fmt: skip
    parser.add_argument("--wait-events", action="store_true",
                        help="sample the sessions' wait events during Pauta's drains")  # fmt: skip
    parser.add_argument("--statements", action="store_true",
                        help="Pauta on a private cluster with pg_stat_statements: each "
                             "statement's share of a workflow")  # fmt: skip
    parser.add_argument("--cluster", action="store_true",
                        help="every system on a private cluster of production settings "
                             "(autovacuum on) instead of DATABASE_URL's server")  # fmt: skip
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.workflows < 1 or min(args.threads) < 1:
        parser.error("--workflows and every --threads value must be at least 1")
    if args.statements and args.only != "pauta":
        parser.error("--statements measures Pauta on a private cluster: add --only pauta")
    results: dict[str, Any] = {"workflows": args.workflows}
    private = args.statements or args.cluster
    with private_server(args.statements) if private else nullcontext():
        if args.only != "dbos":
            results["pauta"] = [
                {
                    "threads": threads,
                    **pauta(
                        args.workflows,
                        threads,
                        wait_events=args.wait_events,
                        statements=args.statements,
                    ),
                }
                for threads in args.threads
            ]
        if args.only != "dbos" and args.relaxed:
            results["pauta_relaxed_durability"] = [
                {
                    "threads": threads,
                    **pauta(args.workflows, threads, "two_noops_relaxed", args.wait_events),
                }
                for threads in args.threads
            ]
        if args.only != "pauta":
            results["dbos"] = dbos(args.workflows)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
