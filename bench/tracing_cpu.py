"""What tracing costs the runner in CPU: bench.pauta_system's drain (one runner process,
concurrency 10, no-op jobs) untraced and traced (exported over OTLP/HTTP to a real receiver on
loopback), alternating, with the runner's own CPU time read from ``/proc`` from its first
attempt to the drained queue.

    DATABASE_URL=postgresql://... python -m bench.tracing_cpu [--jobs 20000] [--rounds 3]
        [--prefetch 50,500]

The drain's rate moves with the machine from round to round (on a shared 2-core machine, 20%
between two untraced rounds); the runner's CPU a job moves less, and a traced round minus the
untraced round just before it is what tracing cost in that minute. Its startup (imports, the
SDK's set-up) is left out. One JSON line per drain, then the medians: jobs per second (to the
last span received, as ``make bench`` counts a traced drain, and to the drained queue), how
long the last span came after the queue was drained, CPU µs a job, the on/off ratio and the
traced minus untraced CPU of each round. Linux only (/proc).

``--prefetch`` measures the runner with each of these prefetch caps in turn, within each round
(its lines and medians name the cap); without it, the runner's default.
"""

import argparse
import json
import os
import statistics
import sys

from bench.pages import scratch_database
from bench.pauta_system import PREFETCH, Peer, attempts_exported
from bench.telemetry_overhead import otel_on, set_telemetry
from devtools.otlp_receiver import Receiver

MODES = ("off", "on")


def drain(
    peer: Peer, jobs: int, receiver: Receiver, mode: str, prefetch: int | None
) -> dict[str, float]:
    set_telemetry(otel_on(receiver) if mode == "on" else None)
    peer.runner_environment = {} if prefetch is None else {PREFETCH: str(prefetch)}
    peer.reset()
    exported = attempts_exported(receiver, jobs) if mode == "on" else None
    run = peer.drain_run(jobs, 10, exported, runner_cpu=True)
    cpu = run.runner_cpu or 0.0
    return {
        "jobs_per_s": round(run.jobs_per_s(jobs)),
        "jobs_per_s_to_drained": round(jobs / (run.drained - run.first)),
        "last_span_after_drained_ms": round((run.end - run.drained) * 1000, 1),
        "cpu_us_per_job": round(cpu / jobs * 1e6, 1),
    }


def prefetch_caps(text: str) -> list[int]:
    """``--prefetch``'s comma-separated caps, each a whole number of 0 or more."""
    try:
        caps = [int(part) for part in text.split(",")]
    except ValueError:
        caps = []
    if not caps or min(caps) < 0:
        raise argparse.ArgumentTypeError(
            f"takes whole numbers of 0 or more separated by commas, e.g. 50,500; not {text!r}"
        )
    return caps


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tracing_cpu", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefetch", type=prefetch_caps, help="caps to compare, e.g. 50,500")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds take a whole number of at least 1")
    caps: list[int | None] = args.prefetch or [None]
    server = os.environ.get("DATABASE_URL")
    if not server:
        print("set DATABASE_URL to a PostgreSQL server the bench may create databases on",
              file=sys.stderr)  # fmt: skip
        return 2
    receiver = Receiver(keep_spans=False).start()
    rounds: dict[int | None, list[dict[str, dict[str, float]]]] = {cap: [] for cap in caps}
    try:
        with scratch_database(server) as url:
            peer = Peer(url)
            peer.setup()
            for number in range(args.rounds):
                for cap in caps:
                    named = {} if cap is None else {"prefetch": cap}
                    measured = {mode: drain(peer, args.jobs, receiver, mode, cap) for mode in MODES}
                    for mode, figures in measured.items():
                        line = {"round": number, **named, "tracing": mode, **figures}
                        print(json.dumps(line), flush=True)
                    rounds[cap].append(measured)
            set_telemetry(None)
    finally:
        receiver.stop()
    for cap, measured_rounds in rounds.items():
        print(json.dumps(summarize(measured_rounds, {} if cap is None else {"prefetch": cap})))
    return 0


def summarize(
    rounds: list[dict[str, dict[str, float]]], named: dict[str, int]
) -> dict[str, object]:
    summary: dict[str, object] = {"summary": "median of rounds", **named}
    for mode in MODES:
        for field in ("jobs_per_s", "jobs_per_s_to_drained", "cpu_us_per_job"):
            summary[f"{field} {mode}"] = statistics.median(r[mode][field] for r in rounds)
    summary["on/off"] = round(
        statistics.median(r["on"]["jobs_per_s"] / r["off"]["jobs_per_s"] for r in rounds), 3
    )
    summary["traced minus untraced cpu_us_per_job"] = statistics.median(
        round(r["on"]["cpu_us_per_job"] - r["off"]["cpu_us_per_job"], 1) for r in rounds
    )
    return summary


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
