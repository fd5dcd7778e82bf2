"""What an attempt's span costs when many threads start and end them at once.

    .venv/bin/python -m bench.span_threads [--spans 20000] [--rounds 3] [--threads 1,10]

Telemetry is set up as a worker sets it up (``telemetry.configure``, OTLP/HTTP; the endpoint
takes no request: the spans' batch never fills and nothing is sent), with the collector's
threshold a worker sets. Each of ``--threads`` threads then runs ``--spans`` attempts' worth of
``telemetry.ConsumerSpan`` around nothing, reading the span's trace id as the runner does for
the attempt's row; the threads start together. For each thread count: the process's CPU time
and the wall time per span, one JSON line per round.

It guards the cost of the span's own locking: one lock shared by every deferred span, taken at
each attempt's end, made the ten threads' spans cost 34 µs of CPU each against 10 for one
thread (a convoy: a thread that loses the GIL while holding it makes the others queue on it);
each span's own lock brought the ten threads' back to the one thread's (docs/benchmarks.md,
"2026-12-04, morning").
"""

import argparse
import gc
import json
import os
import sys
import threading
import time
from datetime import UTC, datetime


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.span_threads", description=__doc__)
    parser.add_argument("--spans", type=int, default=20_000, help="per thread")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,10", help="thread counts, comma-separated")
    args = parser.parse_args(argv)
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

    def attempts(jobs: list[ClaimedJob], start: threading.Barrier) -> None:
        start.wait()
        for job in jobs:
            with telemetry.ConsumerSpan(job, None) as span:
                telemetry.trace_id_of(span)

    for round_number in range(args.rounds):
        for count in counts:
            jobs = [
                [
                    ClaimedJob(n, 1, "default", "bench.noop", {"n": n}, 0, 1, 5, now, now)
                    for n in range(args.spans)
                ]
                for _ in range(count)
            ]
            start = threading.Barrier(count + 1)
            threads = [threading.Thread(target=attempts, args=(part, start)) for part in jobs]
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
                        "round": round_number,
                        "spans": spans,
                        "cpu_us_per_span": round(cpu / spans * 1e6, 2),
                        "wall_us_per_span": round(wall / spans * 1e6, 2),
                    }
                ),
                flush=True,
            )
            if sink is not None:
                sink[1]._spans.clear()  # the encoded spans: not sent, not kept
            del jobs
            gc.collect()
    os._exit(0)  # the sink's exit would try to send what it holds to the discarding endpoint


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
