"""Run every measurement for one peer on a throwaway database and print JSON lines.

Usage (from the repository root)::

    .venv-bench/bin/python -m bench.peers pgqueuer \
        --dsn postgresql://postgres@127.0.0.1:5432/postgres [--small]
"""

from __future__ import annotations

import argparse
import functools
import json
import secrets
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from bench.peers import PEERS, load
from bench.peers._common import PeerBase


@dataclass(frozen=True)
class Sizes:
    single: int
    bulk: int
    batch: int
    drain: int
    concurrencies: tuple[int, ...]
    pickup: int
    interval: float


FULL = Sizes(2000, 20000, 1000, 20000, (1, 10), 500, 0.010)
SMALL = Sizes(200, 2000, 1000, 1000, (1, 10), 50, 0.010)


def with_database(dsn: str, dbname: str) -> str:
    """The same server URL pointing at another database."""
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path=f"/{dbname}"))


@contextmanager
def scratch_database(dsn: str, prefix: str) -> Iterator[str]:
    """Create a fresh database on the server of `dsn`, yield its URL, drop it afterwards."""
    dbname = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        yield with_database(dsn, dbname)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
            )


Result = float | dict[str, float]
Fields = dict[str, str | int | float]


def measurements(peer: PeerBase, sizes: Sizes) -> Iterator[tuple[Callable[[], Result], Fields]]:
    """(measurement, fields describing it) in the order they are run."""
    yield (
        functools.partial(peer.enqueue_single, sizes.single),
        {"metric": "enqueue_single", "jobs": sizes.single},
    )
    yield (
        functools.partial(peer.enqueue_bulk, sizes.bulk, sizes.batch),
        {"metric": "enqueue_bulk", "jobs": sizes.bulk, "batch": sizes.batch},
    )
    for concurrency in sizes.concurrencies:
        yield (
            functools.partial(peer.drain, sizes.drain, concurrency),
            {"metric": "drain", "concurrency": concurrency, "jobs": sizes.drain},
        )
    yield (
        functools.partial(peer.pickup_latency, sizes.pickup, sizes.interval),
        {"metric": "pickup_latency", "jobs": sizes.pickup, "interval_ms": sizes.interval * 1e3},
    )


def result_fields(value: Result) -> dict[str, float]:
    if isinstance(value, dict):
        return {f"{key}_ms": round(ms, 2) for key, ms in value.items()}
    return {"jobs_per_s": round(value, 1)}


def exit_on_sigterm(signum: int, frame: object) -> None:
    """Turn SIGTERM into SystemExit so runners are stopped and the database dropped."""
    sys.exit(128 + signum)


def main() -> None:
    signal.signal(signal.SIGTERM, exit_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=PEERS)
    parser.add_argument("--dsn", required=True, help="server URL; a scratch database is made")
    parser.add_argument("--small", action="store_true", help="much smaller sizes, quick check")
    args = parser.parse_args()

    peer_class = load(args.peer)
    with scratch_database(args.dsn, f"bench_{args.peer}") as dsn:
        peer: PeerBase = peer_class(dsn)
        peer.setup()
        for measure, fields in measurements(peer, SMALL if args.small else FULL):
            peer.reset()
            value = measure()
            line = {"system": peer.name, "version": peer.version, **fields, **result_fields(value)}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
