"""Pauta before and after a change, measured in one run: two checkouts, alternating.

    DATABASE_URL=postgresql://... python -m bench.before_after BEFORE_DIR [AFTER_DIR]
        [--rounds 2] [--out FILE] [--only drain]

Each measurement runs in a fresh Python process started in a checkout's directory, so that it
imports that checkout's engine (and its runner subprocess, started from the same directory,
too); both use this interpreter, so both have the same libraries. The protocol is
bench.pauta_system's (bench/peers/_common.py): single enqueue (one transaction each), bulk
enqueue (1,000 per call), pickup latency (one job every 10 ms to an idle runner, of one thread
and, as ``make bench`` measures it, of ten) and drain at concurrency 10, the drain with tracing
off, on (exported over OTLP/HTTP to a receiver in this process) and on with the standard
sampler variables set to keep one trace in ten. Checkouts alternate within each round, so a
shared machine's drift hits both.
Prints one JSON line per measurement and, at the end, the medians and after/before ratios.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from devtools.otlp_receiver import Receiver

HERE = Path(__file__).resolve().parent.parent

# Run with the checkout as the current directory (python -c puts it first on sys.path).
CHILD = """
import json, os, resource, secrets, sys
import psycopg
from sqlalchemy.engine import make_url
from bench.pauta_system import Peer

server, measure, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
name = f"bench_before_after_{secrets.token_hex(3)}"
admin = make_url(server).set(database="postgres").render_as_string(False)
with psycopg.connect(admin, autocommit=True) as connection:
    connection.execute(f"CREATE DATABASE {name}")
try:
    peer = Peer(make_url(server).set(database=name).render_as_string(False))
    peer.setup()
    peer.reset()
    # CPU seconds, which other processes on a shared machine disturb far less than wall time:
    # this process's for enqueue, the runner subprocess's (a child, waited for) for the drain.
    self_before = resource.getrusage(resource.RUSAGE_SELF)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if measure == "enqueue_single":
        figure = {"jobs_per_s": round(peer.enqueue_single(jobs), 1)}
    elif measure == "enqueue_bulk":
        figure = {"jobs_per_s": round(peer.enqueue_bulk(jobs, 1000), 1)}
    elif measure.startswith("pickup_latency"):
        summary = peer.pickup_latency(jobs, 0.010, 10 if measure.endswith("c10") else 1)
        figure = {f"{key}_ms": round(value, 2) for key, value in summary.items()}
    else:
        figure = {"jobs_per_s": round(peer.drain(jobs, 10), 1)}
    used = resource.getrusage(
        resource.RUSAGE_CHILDREN if measure == "drain" else resource.RUSAGE_SELF
    )
    before = children_before if measure == "drain" else self_before
    cpu = used.ru_utime + used.ru_stime - before.ru_utime - before.ru_stime
    if not measure.startswith("pickup_latency"):
        figure["cpu_us_per_job"] = round(cpu / jobs * 1e6, 1)
finally:
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
print(json.dumps(figure))
"""

OTEL = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_TRACES_SAMPLER",
    "OTEL_TRACES_SAMPLER_ARG",
)


def measure(
    checkout: Path, server: str, name: str, jobs: int, otel: dict[str, str]
) -> dict[str, Any]:
    environment = {k: v for k, v in os.environ.items() if k not in OTEL}
    environment.update(otel)
    environment.pop("PYTHONPATH", None)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, server, name, str(jobs)],
        cwd=checkout,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
    )
    if child.returncode != 0:
        raise RuntimeError(f"{checkout} {name} failed:\n{child.stderr[-3000:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.before_after", description=__doc__)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path, nargs="?", default=HERE)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies the job counts")
    parser.add_argument("--out", help="also append the JSON lines to this file")
    parser.add_argument(
        "--only", default="", help="measure only the figures whose name holds this, e.g. drain"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or not args.scale > 0:
        parser.error("--rounds takes a whole number of at least 1, --scale a number above 0")
    for checkout in (args.before, args.after):
        if not (checkout / "jobqueue" / "runner.py").is_file():
            parser.error(f"{checkout} is not a checkout of Pauta (no jobqueue/runner.py in it)")
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (scratch databases are made)")
    receiver = Receiver(keep_spans=False).start()  # counts spans by name, keeps none
    tracing_on = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    }
    sampled = {
        **tracing_on,
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    }
    plan = [
        ("enqueue_single", "enqueue_single", 2000, {}),
        ("enqueue_bulk", "enqueue_bulk", 20_000, {}),
        ("pickup_latency", "pickup_latency", 300, {}),
        ("pickup_latency c=10", "pickup_latency_c10", 300, {}),
        ("drain c=10 tracing off", "drain", 10_000, {}),
        ("drain c=10 tracing on", "drain", 10_000, tracing_on),
        ("drain c=10 tracing on, 10% sampled", "drain", 10_000, sampled),
    ]
    plan = [step for step in plan if args.only in step[0]]
    if not plan:
        parser.error(f"--only {args.only!r} matches none of the figures")
    if any(int(jobs * args.scale) < 1 for _, _, jobs, _ in plan):
        parser.error(f"--scale {args.scale:g} leaves a figure without a single job")
    checkouts = {"before": args.before.resolve(), "after": args.after.resolve()}
    figures: dict[tuple[str, str], list[dict[str, Any]]] = {}
    out = open(args.out, "a") if args.out else None
    try:
        for round_number in range(args.rounds):
            for metric, name, jobs, otel in plan:
                order = list(checkouts.items())
                if round_number % 2:
                    order.reverse()
                for label, checkout in order:
                    figure = measure(checkout, server, name, int(jobs * args.scale), otel)
                    figures.setdefault((metric, label), []).append(figure)
                    record = {"metric": metric, "checkout": label, "round": round_number, **figure}
                    line = json.dumps(record)
                    print(line, flush=True)
                    if out is not None:
                        out.write(line + "\n")
        for line in summary(figures, plan):
            print(line, flush=True)
            if out is not None:
                out.write(line + "\n")
    finally:
        receiver.stop()
        if out is not None:
            out.close()
    return 0


def summary(
    figures: dict[tuple[str, str], list[dict[str, Any]]], plan: list[tuple[Any, ...]]
) -> list[str]:
    lines = []
    medians: dict[tuple[str, str], float] = {}
    for metric, *_ in plan:
        field = "p99_ms" if metric.startswith("pickup_latency") else "jobs_per_s"
        for label in ("before", "after"):
            medians[metric, label] = statistics.median(f[field] for f in figures[metric, label])
        record: dict[str, Any] = {
            "summary": metric,
            "field": field,
            "before": medians[metric, "before"],
            "after": medians[metric, "after"],
            "after_over_before": round(medians[metric, "after"] / medians[metric, "before"], 3),
        }
        if "cpu_us_per_job" in figures[metric, "before"][0]:
            for label in ("before", "after"):
                record[f"cpu_us_per_job_{label}"] = statistics.median(
                    f["cpu_us_per_job"] for f in figures[metric, label]
                )
        lines.append(json.dumps(record))
    drains = {metric for metric, *_ in plan if metric.startswith("drain c=10 tracing")}
    if len(drains) < 3:  # the ratios need all three drains (--only left some out)
        return lines
    for label in ("before", "after"):
        off = medians["drain c=10 tracing off", label]
        ratios = {
            mode: round(medians[f"drain c=10 tracing on{mode}", label] / off, 3)
            for mode in ("", ", 10% sampled")
        }
        lines.append(
            json.dumps(
                {
                    "summary": "tracing on/off",
                    "checkout": label,
                    "all sampled": ratios[""],
                    "10% sampled": ratios[", 10% sampled"],
                }
            )
        )
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
