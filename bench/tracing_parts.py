"""What each part of tracing costs a drain: bench.pauta_system's drain (one runner process,
concurrency 10, no-op jobs, exporting over OTLP/HTTP to a real receiver on loopback) untraced,
traced, and traced with parts left out of the runner (bench.pauta_system's
``switch_off_tracing_parts``: the export, the two histograms, the spans).

    DATABASE_URL=postgresql://... python -m bench.tracing_parts [--jobs 40000] [--rounds 2]

An experiment to find where a traced drain's time goes, not a configuration anyone runs: each
variant's jobs per second (median of ``--rounds``, variants alternating) and its share of the
untraced drain, one JSON line each.
"""

import argparse
import json
import os
import statistics
import sys

from bench.pages import scratch_database
from bench.pauta_system import TRACING_WITHOUT, Peer, attempts_exported
from bench.telemetry_overhead import otel_on, set_telemetry
from devtools.otlp_receiver import Receiver

VARIANTS = {
    "off": None,
    "on": "",
    "on without export": "export",
    "on without encoding": "encoding",
    "on without histograms": "histograms",
    "on without export and histograms": "export,histograms",
    "on without spans": "spans",
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_parts", description=__doc__)
    parser.add_argument("--jobs", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="which, comma-separated (default: all; off, the reference, always)",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds take a whole number of at least 1")
    named = [variant.strip() for variant in args.variants.split(",") if variant.strip()]
    chosen = ["off", *(variant for variant in named if variant != "off")]  # the reference
    if unknown := [variant for variant in named if variant not in VARIANTS]:
        parser.error(f"unknown variants {unknown}; choose from {', '.join(VARIANTS)}")
    server = os.environ.get("DATABASE_URL")
    if not server:
        print("set DATABASE_URL to a PostgreSQL server the bench may create databases on",
              file=sys.stderr)  # fmt: skip
        return 2
    receiver = Receiver(keep_spans=False).start()  # counts spans by name, keeps none
    try:
        with scratch_database(server) as url:
            peer = Peer(url)
            peer.setup()
            figures: dict[str, list[float]] = {variant: [] for variant in chosen}
            for _ in range(args.rounds):
                for variant in chosen:
                    without = VARIANTS[variant]
                    set_telemetry(None if without is None else otel_on(receiver))
                    peer.runner_environment = {TRACING_WITHOUT: without or ""}
                    peer.reset()
                    sent = without is not None and not {"export", "spans"} & set(without.split(","))
                    exported = attempts_exported(receiver, args.jobs) if sent else None
                    figures[variant].append(peer.drain(args.jobs, 10, exported))
            set_telemetry(None)
    finally:
        receiver.stop()
    off = statistics.median(figures["off"])
    for variant, values in figures.items():
        rate = statistics.median(values)
        print(json.dumps({"variant": variant, "jobs_per_s": round(rate),
                          "share_of_off": round(rate / off, 3), "rounds": values}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
