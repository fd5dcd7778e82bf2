"""Where the time of a job goes: each part of the enqueue and worker paths timed on its own.

    DATABASE_URL=postgresql://... python -m bench.profile_breakdown [--jobs 2000] [--out FILE]

Prints one JSON line per part (microseconds per job, the median of ``--rounds`` rounds) on a
scratch database of the server: the client-side steps of ``enqueue`` (checks, JSON, the
producer span, the statement), the server's share of ``job_insert`` as EXPLAIN (ANALYZE) splits
it (the insert, the tenant foreign key, the statement trigger), the round trip and commit floors
of the server, the bulk path per job, and the worker's steps per job (claim, run, finish) with
tracing off and on. It is a profile, not a comparison: bench/hot_statements.py measures the
alternatives against each other.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from queue import SimpleQueue
from typing import Any

import psycopg

from bench.pages import scratch_database
from jobqueue import JobRequest, enqueue, enqueue_many, telemetry
from jobqueue.enqueue import _payload_json, _payloads_json, _prepare
from jobqueue.execution import run_job
from jobqueue.queries import all_queries
from jobqueue.registry import TaskRegistry
from jobqueue.store import JobStore, batch_params

ROOT = Path(__file__).resolve().parent.parent
TASK = "bench_probe"
WORKER = "profile"


def migrate(url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "SECRET_KEY": "bench"},
        check=True,
        capture_output=True,
    )


def per_job_us(action: Callable[[], Any], jobs: int, per_call: int = 1) -> float:
    started = time.perf_counter()
    for _ in range(jobs // per_call):
        action()
    return (time.perf_counter() - started) / jobs * 1e6


def emit(out: Any, part: str, values: list[float], **details: Any) -> None:
    record = {"part": part, "us_per_job": round(statistics.median(values), 1), **details}
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        out.write(line + "\n")


def explain_triggers(connection: psycopg.Connection[Any], sql: str, params: dict) -> dict:
    """EXPLAIN (ANALYZE, BUFFERS) of one statement, rolled back: total, triggers, planning."""
    with connection.transaction(force_rollback=True):
        row = connection.execute(
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params, prepare=False
        ).fetchone()
    assert row is not None
    plan = row[0][0]
    return {
        "planning_ms": plan["Planning Time"],
        "execution_ms": plan["Execution Time"],
        "triggers": {t["Trigger Name"]: [t["Time"], t["Calls"]] for t in plan.get("Triggers", [])},
    }


_provider: Any = None


@contextmanager
def tracing(on: bool) -> Iterator[None]:
    """An SDK tracer provider (one per process) with a batch processor whose exporter drops the
    spans: the span work in this process, without the network."""
    global _provider
    if not on:
        yield
        return
    if _provider is None:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )

        class Dropping(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        _provider = TracerProvider()
        _provider.add_span_processor(BatchSpanProcessor(Dropping()))
        trace.set_tracer_provider(_provider)
    telemetry.mark_active_for_tests()
    try:
        yield
    finally:
        _provider.force_flush()
        telemetry._configured_pid = None


def enqueue_parts(url: str, jobs: int, rounds: int, out: Any) -> None:
    queries = all_queries()
    request = JobRequest(TASK, {"seq": 1})
    tasks = TaskRegistry()
    new_job = _prepare(request, tasks)
    payload = _payload_json(TASK, {"seq": 1}, 256 * 1024)
    with psycopg.connect(url, autocommit=True) as conn:
        store = JobStore(conn)
        parts: dict[str, list[float]] = {}

        def add(part: str, value: float) -> None:
            parts.setdefault(part, []).append(value)

        for _ in range(rounds):
            add(
                "enqueue: whole call, autocommit",
                per_job_us(lambda: enqueue(conn, TASK, {"seq": 1}), jobs),
            )
            add("enqueue: checks (_prepare)", per_job_us(lambda: _prepare(request, tasks), jobs))
            add(
                "enqueue: payload JSON",
                per_job_us(lambda: _payload_json(TASK, {"seq": 1}, 256 * 1024), jobs),
            )

            def producer_off() -> None:
                with telemetry.producer("default", TASK, 1):
                    pass

            add("enqueue: producer span, tracing off", per_job_us(producer_off, jobs))
            with tracing(True):
                add("enqueue: producer span, tracing on", per_job_us(producer_off, jobs))
            add(
                "enqueue: job_insert, autocommit (statement + commit)",
                per_job_us(lambda: store.insert_job(new_job, payload), jobs),
            )
            with conn.transaction(force_rollback=True):
                add(
                    "enqueue: job_insert inside one transaction (no commit)",
                    per_job_us(lambda: store.insert_job(new_job, payload), jobs),
                )
            add(
                "server: round trip of a prepared SELECT 1",
                per_job_us(lambda: conn.execute("SELECT 1", prepare=True), jobs),
            )
            conn.execute("CREATE TABLE IF NOT EXISTS profile_commit (n int)")
            add(
                "server: one-row INSERT into a bare table, autocommit (round trip + WAL flush)",
                per_job_us(
                    lambda: conn.execute("INSERT INTO profile_commit VALUES (1)", prepare=True),
                    jobs,
                ),
            )
        for part, values in parts.items():
            emit(out, part, values, jobs=jobs, rounds=rounds)
        single = {
            "tenant_id": None,
            "queue": "default",
            "task": TASK,
            "payload": '{"seq": 1}',
            "priority": 0,
            "max_attempts": 3,
            "run_at": None,
            "delay": 0.0,
            "unique_key": None,
            "trace_context": None,
            "timeout": None,
        }
        explained = [explain_triggers(conn, queries["job_insert"].sql, single) for _ in range(50)]
        emit(
            out,
            "server: job_insert execution (EXPLAIN ANALYZE)",
            [e["execution_ms"] * 1000 for e in explained],
        )
        for name in explained[0]["triggers"]:
            emit(
                out,
                f"server: job_insert trigger {name}",
                [e["triggers"][name][0] * 1000 for e in explained],
            )
        bulk_parts(conn, store, tasks, jobs, rounds, out)


def bulk_parts(
    conn: psycopg.Connection[Any],
    store: JobStore,
    tasks: TaskRegistry,
    jobs: int,
    rounds: int,
    out: Any,
) -> None:
    batch = 1000
    requests = [JobRequest(TASK, {"seq": seq}) for seq in range(batch)]
    new_jobs = [_prepare(r, tasks) for r in requests]
    payloads = _payloads_json(requests, 256 * 1024)
    parts: dict[str, list[float]] = {}
    calls = max(jobs // batch, 2) * batch
    for _ in range(rounds):
        parts.setdefault("bulk: whole enqueue_many call, per job", []).append(
            per_job_us(lambda: enqueue_many(conn, requests), calls, batch)
        )
        parts.setdefault("bulk: checks (_prepare) per job", []).append(
            per_job_us(lambda: [_prepare(r, tasks) for r in requests], calls, batch)
        )
        parts.setdefault("bulk: payloads JSON per job", []).append(
            per_job_us(lambda: _payloads_json(requests, 256 * 1024), calls, batch)
        )
        parts.setdefault("bulk: insert_jobs statement + commit, per job", []).append(
            per_job_us(lambda: store.insert_jobs(new_jobs, payloads), calls, batch)
        )
    for part, values in parts.items():
        emit(out, part, values, batch=batch, rounds=rounds)
    params = batch_params(new_jobs, payloads)
    sql = all_queries()["job_insert_many"].sql
    explained = [explain_triggers(conn, sql, params) for _ in range(5)]
    emit(
        out,
        "server: job_insert_many execution per job (EXPLAIN ANALYZE)",
        [e["execution_ms"] * 1000 / batch for e in explained],
        batch=batch,
    )
    for name in explained[0]["triggers"]:
        emit(
            out,
            f"server: job_insert_many trigger {name}, per job",
            [e["triggers"][name][0] * 1000 / batch for e in explained],
            batch=batch,
        )


def worker_parts(url: str, jobs: int, rounds: int, out: Any) -> None:
    """The worker's steps on one connection, as the runner does them, per job: claim 10, run
    each (a no-op task), finish the 10 in one statement."""
    tasks = TaskRegistry()

    @tasks.task(TASK)
    def probe(seq: int) -> None:
        pass

    with psycopg.connect(url, autocommit=True) as conn:
        store = JobStore(conn)
        for mode in ("off", "on"):
            parts: dict[str, list[float]] = {}
            for _ in range(rounds):
                conn.execute("TRUNCATE jobs, job_attempts")
                for _ in range(0, jobs, 1000):
                    enqueue_many(conn, [JobRequest(TASK, {"seq": s}) for s in range(1000)])
                claim = finish = run = 0.0
                done = 0
                with tracing(mode == "on"):
                    while done < jobs:
                        t0 = time.perf_counter()
                        claimed = store.claim("default", 10, WORKER, 60.0)
                        t1 = time.perf_counter()
                        results = [run_job(job, tasks, WORKER, _no_connection) for job in claimed]
                        t2 = time.perf_counter()
                        store.finish(results, WORKER)
                        t3 = time.perf_counter()
                        claim, run, finish = claim + t1 - t0, run + t2 - t1, finish + t3 - t2
                        done += len(claimed)
                for part, value in (("claim 10", claim), ("run_job", run), ("finish", finish)):
                    parts.setdefault(f"worker: {part}, tracing {mode}", []).append(
                        value / jobs * 1e6
                    )
            for part, values in parts.items():
                emit(out, part, values, jobs=jobs, rounds=rounds)
        metrics_part(rounds, jobs, out)
        wakeup_parts(url, conn, rounds, out)


def metrics_part(rounds: int, jobs: int, out: Any) -> None:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    telemetry.mark_active_for_tests()
    instruments = telemetry.job_metrics()
    assert instruments is not None

    def batch_of_ten() -> None:
        instruments.record_times([("default", TASK, 0.001, 0.01)] * 10)
        instruments.count("default", TASK, "succeeded", 10)

    values = [per_job_us(batch_of_ten, jobs, 10) for _ in range(rounds)]
    telemetry._configured_pid = None
    emit(out, "worker: job metrics per job (batches of 10), tracing on", values)


def _no_connection() -> Any:
    raise RuntimeError("the probe task needs no connection")


def wakeup_parts(url: str, conn: psycopg.Connection[Any], rounds: int, out: Any) -> None:
    """Pickup's parts: NOTIFY from commit to the listening client, and the thread hop."""
    notify: list[float] = []
    hop: list[float] = []
    samples = 200
    with psycopg.connect(url, autocommit=True) as listener:
        listener.execute("LISTEN profile_wake")
        for _ in range(rounds):
            notify.append(statistics.median(notify_delays(listener, conn, samples)))
            hops = hand_overs(samples)
            hop.append(statistics.median(hops))
    emit(out, "pickup: NOTIFY, statement sent to the listener's wake-up (median)", notify)
    emit(out, "pickup: hand-over to an idle thread through a queue (median)", hop)


def notify_delays(
    listener: psycopg.Connection[Any], conn: psycopg.Connection[Any], samples: int
) -> list[float]:
    delays = []
    for _ in range(samples):
        received: list[float] = []

        def wait(received: list[float] = received) -> None:
            for _ in listener.notifies(timeout=5, stop_after=1):
                received.append(time.perf_counter())

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.002)
        sent = time.perf_counter()
        conn.execute("NOTIFY profile_wake")
        thread.join()
        delays.append((received[0] - sent) * 1e6)
    return delays


def hand_overs(samples: int) -> list[float]:
    hops = []
    box: SimpleQueue[float] = SimpleQueue()
    answers: SimpleQueue[float] = SimpleQueue()

    def take() -> None:
        while (item := box.get()) >= 0:
            answers.put(time.perf_counter() - item)

    taker = threading.Thread(target=take)
    taker.start()
    for _ in range(samples):
        box.put(time.perf_counter())
        hops.append(answers.get() * 1e6)
        time.sleep(0.001)
    box.put(-1.0)
    taker.join()
    return hops


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.profile_breakdown", description=__doc__)
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", help="also append the JSON lines to this file")
    parser.add_argument("--only", choices=("enqueue", "worker"), help="profile one path only")
    args = parser.parse_args(argv)
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (a scratch database is made)")
    out = open(args.out, "a") if args.out else None
    try:
        with scratch_database(server) as url:
            migrate(url)
            if args.only != "worker":
                enqueue_parts(url, args.jobs, args.rounds, out)
            if args.only != "enqueue":
                worker_parts(url, args.jobs, args.rounds, out)
    finally:
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
