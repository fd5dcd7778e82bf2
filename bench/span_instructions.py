"""What an attempt's span costs in instructions, counted by valgrind's callgrind: the span's
start and end (``telemetry.ConsumerSpan`` around a no-op, as ``run_job`` enters it), and the
same with its OTLP encoding (``otlp_encoding.encode_unchanged``, as the sink's thread encodes
it), for this checkout and, with ``--before DIR``, another one.

    python -m bench.span_instructions [--spans 5000] [--before DIR]

On this 2-core machine the wall clock of a traced drain moved by a quarter from one round to
the next (docs/benchmarks.md), so a change of a few tenths of a microsecond a span cannot be
read there; an instruction count does not depend on what else the machine is doing. Each
figure is (instructions of a run with ``--spans`` spans - those of a run with none) / spans:
Python's start, the imports and ``telemetry.configure`` cancel out. The sink takes the ended
spans into a list instead of its thread (nothing is sent), so that only the worker's part and
the encoding are counted. Instructions are not time (a cache miss costs more than an add), but
the same Python on the same inputs gives the same count: a guard for the span's path, beside
``bench.tracing_cpu``'s wall clock and CPU time. Needs valgrind (Debian's ``valgrind``).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

PARTS = {"start and end": "spans", "start, end and encoding": "encoded"}
ROOT = Path(__file__).resolve().parent.parent


def child(spans: int, part: str) -> None:
    """Run ``spans`` attempt spans (and encode them, for ``encoded``) in this process."""
    os.environ.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",  # never reached: nothing sent
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        }
    )
    from jobqueue import attempt_export, otlp_encoding, telemetry
    from jobqueue.store import ClaimedJob

    ended: list[object] = []
    attempt_export.AttemptSpanSink.add = lambda self, span: ended.append(span)  # type: ignore[method-assign,assignment]
    telemetry.configure("pauta-worker")
    now = datetime.now(UTC)
    jobs = [
        ClaimedJob(100_000 + n, 1, "default", "bench_probe", {}, 0, 1, 3, now, now)
        for n in range(spans)
    ]
    consumer_span = telemetry.ConsumerSpan
    for job in jobs:
        with consumer_span(job, None):
            pass
    if part == "encoded":
        encode = otlp_encoding.encode_unchanged
        encoded = [encode(span) for span in ended]  # type: ignore[arg-type]
        assert len(encoded) == spans
    sys.stdout.flush()
    os._exit(0)  # the sink's thread and atexit's flush are left out of the count


def instructions(checkout: Path, spans: int, part: str) -> int:
    """The instructions callgrind counts for a child run of ``spans`` spans with ``checkout``'s
    engine (first on the path)."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(Path(__file__).resolve()),  # this file, run against the checkout's engine
        "--child",
        part,
        "--spans",
        str(spans),
    ]
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"the count in {checkout} failed:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def per_span(checkout: Path, spans: int, part: str) -> float:
    return (instructions(checkout, spans, part) - instructions(checkout, 0, part)) / spans


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.span_instructions", description=__doc__)
    parser.add_argument("--spans", type=int, default=5000)
    parser.add_argument("--before", type=Path, help="another checkout, counted the same way")
    parser.add_argument("--child", choices=sorted(PARTS.values()), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # a counted run; its caller also makes one of no spans
        child(args.spans, args.child)
    if args.spans < 1:
        parser.error(f"--spans must be 1 or more, not {args.spans}")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    checkouts = {"this": ROOT}
    if args.before is not None:
        if not (args.before / "jobqueue" / "telemetry.py").is_file():
            raise SystemExit(f"--before {args.before} is not a checkout of this project")
        checkouts = {"before": args.before.resolve(), **checkouts}
    for label, checkout in checkouts.items():
        for part_name, part in PARTS.items():
            count = per_span(checkout, args.spans, part)
            line = {"checkout": label, "path": str(checkout), "part": part_name}
            print(json.dumps({**line, "spans": args.spans, "instructions_per_span": round(count)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
