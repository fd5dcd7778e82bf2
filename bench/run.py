"""`make bench`: Pauta and its peers, measured in one run on one PostgreSQL server.

Prints one JSON line per measurement, then one line per target with Pauta's ratio to the best
peer. Each system gets a fresh database of its own on the same server; measurements go metric
by metric across all systems, so slow drift of the machine affects every system alike.

    python -m bench.run [--dsn URL] [--small] [--systems pauta,pgqueuer,...]
"""

import argparse
import importlib
import json
import secrets
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from devtools.database import database_url

SYSTEMS = {
    "pauta": "bench.pauta_system",
    "pauta-supervisor": "bench.pauta_supervised",
    "pauta-fifo": "bench.pauta_fifo",
    "pauta-limited": "bench.pauta_limited",
    "pgqueuer": "bench.peers.pgqueuer_peer",
    "procrastinate": "bench.peers.procrastinate_peer",
    "awa": "bench.peers.awa_peer",
}


@dataclass(frozen=True)
class Sizes:
    single: int
    bulk: int
    drain: int
    pickup: int


FULL = Sizes(single=2000, bulk=20_000, drain=20_000, pickup=500)
SMALL = Sizes(single=200, bulk=2000, drain=2000, pickup=50)


@dataclass(frozen=True)
class Target:
    """Pauta's figure against the best peer's: `higher` figures (throughput) or lower (latency)."""

    metric: str
    field: str
    higher_is_better: bool
    ratio: float
    absolute: float | None = None  # an extra ceiling, e.g. p99 under 5 ms


OURS = ("pauta", "pauta-supervisor", "pauta-fifo", "pauta-limited")

TARGETS = [
    Target("drain c=1", "jobs_per_s", True, 2.0),
    Target("drain c=10", "jobs_per_s", True, 2.0),
    Target("enqueue_bulk", "jobs_per_s", True, 1.5),
    Target("enqueue_single", "jobs_per_s", True, 1.0),
    Target("pickup_latency", "p99_ms", False, 1.0, absolute=5.0),
]


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


class Database:
    """A fresh database on the server for one system, dropped at the end."""

    def __init__(self, server_url: str, system: str) -> None:
        self.server_url = server_url
        self.name = f"bench_{system.replace('-', '_')}_{secrets.token_hex(3)}"

    def url(self) -> str:
        return make_url(self.server_url).set(database=self.name).render_as_string(False)

    def admin(self) -> psycopg.Connection[Any]:
        admin_url = make_url(self.server_url).set(database="postgres")
        return psycopg.connect(admin_url.render_as_string(False), autocommit=True)

    def create(self) -> None:
        with self.admin() as admin:
            admin.execute(f"CREATE DATABASE {self.name}")

    def drop(self) -> None:
        with self.admin() as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def measurements(sizes: Sizes) -> list[tuple[str, dict[str, Any], Callable[[Any], dict[str, Any]]]]:
    def single(peer: Any) -> dict[str, Any]:
        return {"jobs_per_s": round(peer.enqueue_single(sizes.single), 1)}

    def bulk(peer: Any) -> dict[str, Any]:
        return {"jobs_per_s": round(peer.enqueue_bulk(sizes.bulk, 1000), 1)}

    def drain(concurrency: int) -> Callable[[Any], dict[str, Any]]:
        return lambda peer: {"jobs_per_s": round(peer.drain(sizes.drain, concurrency), 1)}

    def pickup(peer: Any) -> dict[str, Any]:
        summary = peer.pickup_latency(sizes.pickup, 0.010)
        return {f"{key}_ms": round(value, 2) for key, value in summary.items()}

    return [
        ("enqueue_single", {"jobs": sizes.single}, single),
        ("enqueue_bulk", {"jobs": sizes.bulk, "batch": 1000}, bulk),
        ("drain c=1", {"jobs": sizes.drain, "concurrency": 1}, drain(1)),
        ("drain c=10", {"jobs": sizes.drain, "concurrency": 10}, drain(10)),
        ("pickup_latency", {"jobs": sizes.pickup, "interval_ms": 10}, pickup),
    ]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.run", description=__doc__)
    parser.add_argument("--dsn", help="server to use (default: DATABASE_URL or embedded)")
    parser.add_argument("--small", action="store_true", help="small sizes, for a quick check")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = [name for name in names if name not in SYSTEMS]
    if unknown:
        parser.error(f"unknown system {unknown[0]!r}; choose from {', '.join(SYSTEMS)}")
    if args.dsn:
        return run(args.dsn, names, SMALL if args.small else FULL)
    with database_url() as (url, description):
        print(description, file=sys.stderr)
        return run(url, names, SMALL if args.small else FULL)


def run(server_url: str, names: list[str], sizes: Sizes) -> int:
    peers: dict[str, Any] = {}
    databases: list[Database] = []
    results: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        for name in names:
            database = Database(server_url, name)
            database.create()
            databases.append(database)
            peer = importlib.import_module(SYSTEMS[name]).Peer(database.url())
            peer.setup()
            peers[name] = peer
        for metric, details, measure in measurements(sizes):
            for name, peer in peers.items():
                peer.reset()
                record = {"system": peer.name, "version": peer.version, "metric": metric}
                try:
                    figures = measure(peer)
                except Exception as error:  # one peer failing must not hide the others
                    traceback.print_exc()
                    emit({**record, **details, "error": f"{type(error).__name__}: {error}"})
                    continue
                results[(name, metric)] = figures
                emit({**record, **details, **figures})
    finally:
        for database in databases:
            database.drop()
    for target in TARGETS:
        emit(compare(target, results, [name for name in names if name not in OURS]))
    for metric in ("drain c=1", "drain c=10"):
        emit(supervisor_overhead(metric, results))
        for variant in ("pauta", "pauta-limited"):
            emit(control_overhead(metric, variant, results))
    return 0


def control_overhead(
    metric: str, variant: str, results: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Any]:
    """Fair shares (pauta, the default) and a rate limit far above the drain (pauta-limited)
    against the plain claim (pauta-fifo), measured in the same run: >= 90%."""
    record: dict[str, Any] = {"target": f"{variant} {metric}", "field": "jobs_per_s"}
    plain = results.get(("pauta-fifo", metric), {}).get("jobs_per_s")
    measured = results.get((variant, metric), {}).get("jobs_per_s")
    if not plain or not measured:
        return {**record, "verdict": "not measured"}
    ratio = measured / plain
    return {
        **record,
        variant: measured,
        "pauta-fifo": plain,
        "ratio": round(ratio, 2),
        "goal": ">= 0.9x the plain claim",
        "met": ratio >= 0.9,
    }


def supervisor_overhead(
    metric: str, results: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Any]:
    """The supervisor's drain against the bare runner's, measured in the same run: >= 90%."""
    record: dict[str, Any] = {"target": f"supervisor {metric}", "field": "jobs_per_s"}
    bare = results.get(("pauta", metric), {}).get("jobs_per_s")
    supervised = results.get(("pauta-supervisor", metric), {}).get("jobs_per_s")
    if not bare or not supervised:
        return {**record, "verdict": "not measured"}
    ratio = supervised / bare
    return {
        **record,
        "pauta-supervisor": supervised,
        "pauta": bare,
        "ratio": round(ratio, 2),
        "goal": ">= 0.9x the bare runner",
        "met": ratio >= 0.9,
    }


def compare(
    target: Target, results: dict[tuple[str, str], dict[str, Any]], peers: list[str]
) -> dict[str, Any]:
    ours = results.get(("pauta", target.metric), {}).get(target.field)
    theirs = {
        name: results[(name, target.metric)][target.field]
        for name in peers
        if (name, target.metric) in results
    }
    record: dict[str, Any] = {"target": target.metric, "field": target.field}
    if ours is None or not theirs:
        return {**record, "verdict": "not measured"}
    pick = max if target.higher_is_better else min
    best_peer = pick(theirs, key=lambda name: theirs[name])
    ratio = ours / theirs[best_peer] if target.higher_is_better else theirs[best_peer] / ours
    met = ratio >= target.ratio if target.higher_is_better else ours <= theirs[best_peer]
    if target.absolute is not None:
        met = met and ours < target.absolute
    return {
        **record,
        "pauta": ours,
        "best_peer": best_peer,
        "best_peer_value": theirs[best_peer],
        "ratio": round(ratio, 2),
        "goal": f"{'>=' if target.higher_is_better else '<='} {target.ratio}x"
        + (f" and < {target.absolute}" if target.absolute else ""),
        "met": met,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
