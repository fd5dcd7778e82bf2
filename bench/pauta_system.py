"""Pauta measured with the same protocol as the peers (bench/peers/_common.py).

The runner is the one `worker.py --single` runs (jobqueue.runner.Runner), in an interpreter
set up as worker.py sets its own (WorkerSettings.configure_interpreter: the collector's
threshold; until 2026-12-03, late evening, the bench's runner kept Python's 700), with the
benchmark's concurrency as the queue's thread count (jobs handled at once) and its adaptive
prefetch left on. Profiles: ``defaults`` changes no other setting; ``best`` sets ``BEST``:
the one throughput knob the worker reference offers for short jobs, ``prefetch`` (the most
a queue claims ahead, adapted below it; 500 by default), at 1,000. In three comparisons of
20,000-job drains on 2026-12-04, night (`python -m bench.tracing_cpu --prefetch 50,500,1000`
and two one-off scripts, docs/benchmarks.md), 1,000 drained faster than 500 each time, by
6-11% untraced and 1-13% traced; 2,000 was no faster than 1,000. Enqueue goes through
`enqueue` and `enqueue_many` on an autocommit connection, so each single enqueue is its own
transaction.
The handler records its start in the events file named by BENCH_EVENTS (set by the runner
process), so it works in any process that imports this module as a task module.
"""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import psycopg

from bench.peers._common import (
    EnqueueRun,
    PeerBase,
    Recorder,
    enqueue_each_paced,
    parse_runner_args,
)
from jobqueue import JobRequest, enqueue, enqueue_many, task, telemetry
from jobqueue.runner import Runner
from jobqueue.settings import WorkerSettings

if TYPE_CHECKING:
    from devtools.otlp_receiver import Receiver

ROOT = Path(__file__).resolve().parent.parent
TASK = "bench_probe"
BEST: dict[str, Any] = {"prefetch": 1000}

EVENTS = "BENCH_EVENTS"
TRACING_WITHOUT = "BENCH_TRACING_WITHOUT"
PREFETCH = "BENCH_PREFETCH"  # the runner's prefetch cap, when set (bench.tracing_cpu --prefetch)
RECORD_ALL = "BENCH_RECORD_ALL"

_recorder: Recorder | None = (
    Recorder(os.environ[EVENTS], os.environ.get(RECORD_ALL) == "1")
    if EVENTS in os.environ
    else None
)


@task(TASK)
def bench_probe(seq: int) -> None:
    if _recorder is not None:
        _recorder.record(seq)


class Peer(PeerBase):
    name = "pauta"
    version = version("pauta")
    PROFILES: ClassVar[dict[str, str]] = {
        "defaults": "worker settings' defaults (prefetch up to 500, fair shares on)",
        "best": "the defaults but prefetch up to 1,000",
    }

    def setup(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": self.dsn, "SECRET_KEY": "bench"},
            check=True,
            capture_output=True,
        )

    def reset(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE jobs, job_attempts, queues")
            conn.execute("VACUUM ANALYZE jobs")

    def _enqueue_each(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return enqueue_each_paced(lambda seq: enqueue(conn, TASK, {"seq": seq}), seqs, interval)

    def _enqueue_batches(self, n: int, batch: int) -> float:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            started = time.perf_counter()
            for first in range(0, n, batch):
                requests = [
                    JobRequest(TASK, {"seq": seq}) for seq in range(first, min(first + batch, n))
                ]
                enqueue_many(conn, requests)
            return time.perf_counter() - started

    def _is_drained(self, conn: psycopg.Connection, n: int) -> bool:
        # Both states are served by partial indexes, so this costs the server next to nothing.
        row = conn.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE state = 'available')"
            " AND NOT EXISTS (SELECT 1 FROM jobs WHERE state = 'running')"
        ).fetchone()
        return bool(row and row[0])

    def _count_completed(self, conn: psycopg.Connection) -> int:
        row = conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()
        return int(row[0]) if row else 0


def attempts_exported(receiver: "Receiver", n: int) -> Callable[[], bool]:
    """For a traced drain's end: True once ``n`` more spans of the bench's task have reached
    ``receiver`` than had when this was made."""
    name = f"process {TASK}"
    before = receiver.span_counts[name]
    return lambda: receiver.span_counts[name] - before >= n


def switch_off_tracing_parts(parts: str) -> None:
    """For bench.tracing_parts only: leave out parts of tracing in this runner process, by
    replacing them here (``export``: spans are not sent, and those of the batch processor not
    encoded either; deferred attempt spans are still encoded as they end; ``encoding``: the
    first deferred span's bytes are sent for every one, so the receiver still counts each;
    ``histograms``: the run and wait times are not recorded; ``spans``: attempts get none)."""
    chosen = set(filter(None, parts.split(",")))
    if unknown := chosen - {"export", "encoding", "histograms", "spans"}:
        raise SystemExit(f"{TRACING_WITHOUT} names unknown parts: {', '.join(sorted(unknown))}")
    if "export" in chosen:
        from opentelemetry.sdk.trace.export import SpanExportResult

        from jobqueue import otlp_encoding

        otlp_encoding.SpanExporter.export_encoded = lambda self, encode, count: (  # type: ignore[method-assign]
            SpanExportResult.SUCCESS
        )
    if "encoding" in chosen:
        from jobqueue import attempt_export, otlp_encoding

        encoded: list[bytes] = []

        def encode_first(span: Any) -> bytes:
            if not encoded:
                encoded.append(otlp_encoding.encode_unchanged(span))
            return encoded[0]

        attempt_export.encode_unchanged = encode_first  # type: ignore[assignment]
    if "histograms" in chosen:
        telemetry.JobMetrics.record_times = lambda self, *times: None  # type: ignore[method-assign]
    if "spans" in chosen:

        @contextmanager
        def no_span(job: Any, trace_context: Any) -> Iterator[None]:
            yield None

        telemetry.ConsumerSpan = no_span  # type: ignore[assignment]


def run_runner(**settings: Any) -> None:
    """The runner subprocess: Pauta's Runner on queue `default`, stopped by SIGTERM; ``settings``
    override the defaults (bench.pauta_control's variants)."""
    global _recorder
    args = parse_runner_args()
    _recorder = args.recorder
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # the runner's threads inherit it
    telemetry.configure("pauta-worker")  # as worker.py does: on only when OTEL_* say so
    switch_off_tracing_parts(os.environ.get(TRACING_WITHOUT, ""))
    tuning = {**(BEST if args.profile == "best" else {}), **settings}
    if PREFETCH in os.environ:
        tuning["prefetch"] = int(os.environ[PREFETCH])
    worker_settings = WorkerSettings(
        database_url=args.dsn, queues={"default": args.concurrency}, **tuning
    )
    worker_settings.configure_interpreter()  # as worker.py's runner process does
    runner = Runner(worker_settings)
    runner.start()
    signal.sigwait({signal.SIGTERM})
    runner.stop()


if __name__ == "__main__":
    run_runner()
