"""What tracing costs: drain throughput and console latency with telemetry off and on (exporting
over OTLP/HTTP to a real receiver on loopback), measured in one run and reported as ratios.

    DATABASE_URL=postgresql://... python -m bench.telemetry_overhead [--jobs 20000] [--rounds 2]

The drain is bench.pauta_system's (one runner process, concurrency 10, no-op jobs); off and on
alternate, `--rounds` times each, so drift of the machine affects both alike. The console is the
cycle detail page of bench.cycles_page's data set, in a fresh process per mode (OpenTelemetry's
providers are per process).
"""

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys

import psycopg
from sqlalchemy.engine import make_url

from bench.cycles_page import build
from bench.pages import logged_in_client, scratch_database, timed
from devtools.otlp_receiver import Receiver

OTEL = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_BSP_SCHEDULE_DELAY")


def otel_on(receiver: Receiver) -> dict[str, str]:
    """Export to ``receiver``; what is not a full batch goes within 200 ms (not 5 s), since a
    traced drain ends when every attempt's span has arrived."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }


def set_telemetry(environment: dict[str, str] | None) -> None:
    for name in OTEL:
        os.environ.pop(name, None)
    os.environ.update(environment or {})


def drain(server: str, receiver: Receiver, jobs: int, rounds: int) -> None:
    from bench.pauta_system import Peer, attempts_exported

    name = f"bench_otel_{secrets.token_hex(3)}"
    admin = make_url(server).set(database="postgres").render_as_string(False)
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    try:
        peer = Peer(make_url(server).set(database=name).render_as_string(False))
        peer.setup()
        figures: dict[str, list[float]] = {"off": [], "on": []}
        for _ in range(rounds):
            for mode in ("off", "on"):
                set_telemetry(otel_on(receiver) if mode == "on" else None)
                peer.reset()
                exported = attempts_exported(receiver, jobs) if mode == "on" else None
                figures[mode].append(peer.drain(jobs, 10, exported))
        set_telemetry(None)
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    off, on = statistics.median(figures["off"]), statistics.median(figures["on"])
    spans = receiver.span_counts["process bench_probe"]
    print(json.dumps({"metric": "drain c=10 jobs_per_s", "off": round(off), "on": round(on),
                      "ratio_on_off": round(on / off, 3), "spans_received": spans}))  # fmt: skip


def console(server: str, receiver: Receiver, requests: int) -> None:
    from app import create_app
    from models import db

    with scratch_database(server) as url:
        app = create_app({"DATABASE_URL": url, "SECRET_KEY": secrets.token_hex(16)})
        cycle_id, email, password = build(app)
        with app.app_context():
            db.engine.dispose()
        medians = {}
        for mode in ("off", "on"):
            environment = {**os.environ, **(otel_on(receiver) if mode == "on" else {})}
            for name in OTEL if mode == "off" else ():
                environment.pop(name, None)
            child = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.telemetry_overhead",
                    "--console-child",
                    url,
                    email,
                    password,
                    str(cycle_id),
                    str(requests),
                ],
                env=environment,
                capture_output=True,
                text=True,
                check=True,
            )
            medians[mode] = json.loads(child.stdout)["p50"]
    print(json.dumps({"metric": "cycle detail p50 ms", "off": medians["off"], "on": medians["on"],
                      "ratio_on_off": round(medians["on"] / medians["off"], 3)}))  # fmt: skip


def console_child(url: str, email: str, password: str, cycle_id: str, requests: str) -> None:
    """Time the cycle page in this process (telemetry on if the environment says so)."""
    from app import create_app

    app = create_app({"DATABASE_URL": url, "SECRET_KEY": secrets.token_hex(16)})
    client = logged_in_client(app, email, password)
    samples = timed(client, f"/cycles/{cycle_id}", int(requests))
    print(json.dumps({"p50": round(statistics.median(samples), 2)}))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry_overhead", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=100)
    parser.add_argument("--console-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.console_child:
        console_child(*args.console_child)
        return 0
    server = os.environ.get("DATABASE_URL")
    if not server:
        print("set DATABASE_URL to a PostgreSQL server the bench may create databases on",
              file=sys.stderr)  # fmt: skip
        return 2
    receiver = Receiver(keep_spans=False).start()  # counts spans by name, keeps none
    try:
        drain(server, receiver, args.jobs, args.rounds)
        console(server, receiver, args.requests)
    finally:
        receiver.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
