"""What an attempt's span costs when many threads start and end them at once.

    .venv/bin/python -m bench.span_threads [--spans 20000] [--rounds 3] [--threads 1,10]
                                           [--linked none,own,shared]

Telemetry is set up as a worker sets it up (``telemetry.configure``, OTLP/HTTP; the endpoint
takes no request: the spans' batch never fills and nothing is sent), with the collector's
threshold a worker sets. Each of ``--threads`` threads then runs ``--spans`` attempts' worth of
``telemetry.ConsumerSpan`` around nothing, reading the span's trace id as the runner does for
the attempt's row; the threads start together. For each thread count: the process's CPU time
and the wall time per span, one JSON line per round.

``--linked`` says what the jobs' stored trace contexts name, one JSON line each: ``none`` (as
``make bench`` enqueues: no telemetry in the enqueuing process), ``own`` (each job its own
enqueuing span: single enqueues from traced requests) or ``shared`` (one enqueuing span for
every 100 jobs: ``enqueue_many`` in a traced request). In a slow hour a link cost a span 24-30
µs of CPU on top of the unlinked span's 46, and 11-23 once the encoder wrote links without
attributes directly and a traceparent was read once (docs/benchmarks.md, "2026-12-04,
afternoon").

It guards the cost of the span's own locking: one lock shared by every deferred span, taken at
each attempt's end, made the ten threads' spans cost 34 µs of CPU each against 10 for one
thread (a convoy: a thread that loses the GIL while holding it makes the others queue on it);
each span's own lock brought the ten threads' back to the one thread's (docs/benchmarks.md,
"2026-12-04, morning").
"""

import argparse
import gc
import itertools
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime

# --linked: how many jobs share an enqueuing span (0: none has one)
LINKED = {"none": 0, "own": 1, "shared": 100}


def traceparent(job: int, every: int) -> dict[str, str] | None:
    """The trace context ``producer`` stores for a job, naming the enqueuing span of its group
    of ``every`` jobs (none when 0)."""
    if not every:
        return None
    group = job // every + 1
    return {"traceparent": f"00-{group:032x}-{group:016x}-01"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.span_threads", description=__doc__)
    parser.add_argument("--spans", type=int, default=20_000, help="per thread")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,10", help="thread counts, comma-separated")
    parser.add_argument(
        "--linked",
        default="none",
        help="what the jobs' trace contexts name, comma-separated: none, own, shared",
    )
    args = parser.parse_args(argv)
    linked = [kind.strip() for kind in args.linked.split(",") if kind.strip()]
    if not linked or set(linked) - set(LINKED):
        parser.error(f"--linked takes {', '.join(LINKED)}, comma-separated, not {args.linked!r}")
    try:
        counts = [int(count) for count in args.threads.split(",")]
    except ValueError:
        parser.error(f"--threads takes whole numbers separated by commas, not {args.threads!r}")
    if args.spans < 1 or args.rounds < 1 or min(counts) < 1:
        parser.error("--spans, --rounds and each of --threads take a whole number of at least 1")
    os.environ.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",  # discard: nothing is sent
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": str(args.spans * max(counts) * 2),
            "OTEL_BSP_MAX_QUEUE_SIZE": str(args.spans * max(counts) * 2),
            "OTEL_BSP_SCHEDULE_DELAY": str(24 * 3600 * 1000),
        }
    )
    from jobqueue import telemetry
    from jobqueue.settings import DEFAULT_GC_THRESHOLD
    from jobqueue.store import ClaimedJob

    gc.set_threshold(DEFAULT_GC_THRESHOLD, *gc.get_threshold()[1:])  # as a worker sets it
    telemetry.configure("pauta-bench")
    sink = telemetry._attempt_sink
    now = datetime.now(UTC)

    def attempts(
        jobs: list[ClaimedJob],
        trace_contexts: list[dict[str, str] | None],
        start: threading.Barrier,
    ) -> None:
        start.wait()
        for job, trace_context in zip(jobs, trace_contexts, strict=True):
            with telemetry.ConsumerSpan(job, trace_context) as span:
                telemetry.trace_id_of(span)

    for round_number in range(args.rounds):
        for count, kind in itertools.product(counts, linked):
            every = LINKED[kind]
            jobs = [
                [
                    ClaimedJob(n, 1, "default", "bench.noop", {"n": n}, 0, 1, 5, now, now)
                    for n in range(args.spans)
                ]
                for _ in range(count)
            ]
            contexts = [
                [traceparent(part * args.spans + n, every) for n in range(args.spans)]
                for part in range(count)
            ]
            start = threading.Barrier(count + 1)
            threads = [
                threading.Thread(target=attempts, args=(part, trace_contexts, start))
                for part, trace_contexts in zip(jobs, contexts, strict=True)
            ]
            for thread in threads:
                thread.start()
            cpu, wall = time.process_time(), time.perf_counter()
            start.wait()
            for thread in threads:
                thread.join()
            spans = args.spans * count
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            print(
                json.dumps(
                    {
                        "threads": count,
                        "linked": kind,
                        "round": round_number,
                        "spans": spans,
                        "cpu_us_per_span": round(cpu / spans * 1e6, 2),
                        "wall_us_per_span": round(wall / spans * 1e6, 2),
                    }
                ),
                flush=True,
            )
            if sink is not None:  # the spans: not encoded, not sent, not kept
                with sink[1]._sending:  # held by the sink's thread while it encodes them
                    sink[1]._ended.clear()
                    sink[1]._spans.clear()
            del jobs, contexts
            gc.collect()
    os._exit(0)  # the sink's exit would try to send what it holds to the discarding endpoint


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
