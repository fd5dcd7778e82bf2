"""`make bench`: Pauta and its peers, measured in one run on one PostgreSQL server.

Each system runs in two profiles (bench/peers/_common.py): ``defaults``, the library as its
documentation sets it up, and ``best``, the throughput knobs its documentation offers (each
adapter's docstring says which). "Concurrency" is jobs handled at once, each system fetching
them as it recommends. Every (system, profile) gets a fresh database of its own on the same
server; measurements go metric by metric across all of them, so slow drift of the machine
affects every system alike.

Prints one JSON line per measurement, then the like-for-like ratios: Pauta's defaults against
the peers' defaults, Pauta's best against the peers' best (never one against the other), each
against the goal of issue 16 where one is set, then tracing on/off and the supervisor's and the
claim variants' costs. The opt-in relaxed commit's row (RELAXED) is measured for the best
profiles only and compared with both the peers' durable and relaxed figures; it is not one of
issue 16's figures.

    python -m bench.run [--dsn URL] [--small] [--systems pauta,pgqueuer:best,...] [--label A]
    python -m bench.run --spread FILE.jsonl   # min/max of each ratio over the runs in FILE
"""

import argparse
import importlib
import json
import secrets
import statistics
import sys
import traceback
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

from devtools.database import database_url

if TYPE_CHECKING:
    from devtools.otlp_receiver import Receiver

SYSTEMS = {
    "pauta": "bench.pauta_system",
    "pauta-supervisor": "bench.pauta_supervised",
    "pauta-fifo": "bench.pauta_fifo",
    "pauta-limited": "bench.pauta_limited",
    "pgqueuer": "bench.peers.pgqueuer_peer",
    "procrastinate": "bench.peers.procrastinate_peer",
    "awa": "bench.peers.awa_peer",
    "floor": "bench.floor_system",
}
DEFAULT_SYSTEMS = "pauta,pauta-supervisor,pgqueuer,procrastinate,awa,floor"
OURS = ("pauta", "pauta-supervisor", "pauta-fifo", "pauta-limited")
# The least a queue on psycopg can do (bench/floor_system.py): never a peer, measured only for
# these figures, and set beside each of them against the best peer and Pauta.
FLOOR = "floor"
FLOOR_METRICS = ("enqueue_single", "enqueue_bulk", "pickup_latency")
PROFILES = ("defaults", "best")
CONCURRENCY = 10  # jobs handled at once, in every drain and pickup measurement
TRACED = "drain c=10 traced"
# issue 16 allows a faster mode that relaxes durability only as an opt-in, in its own row: a
# single enqueue whose commit does not wait for the WAL flush (synchronous_commit off, which
# the enqueuing transaction sets; docs/howto/relax-the-enqueue-commit.md), Pauta's and the
# peers' best profiles
RELAXED = "enqueue_single relaxed"
TRACING_ROUNDS = 2  # untraced and traced drains, alternating, for the tracing ratio
ENQUEUE_ROUNDS = 3  # single and bulk enqueue: the median of this many, the peers taking turns


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
    """Pauta's figure against the best peer's in the same profile: `higher` figures
    (throughput) or lower (latency); `ratio` and `absolute` are issue 16's goals (best only)."""

    metric: str
    field: str
    higher_is_better: bool
    ratio: float
    absolute: float | None = None  # an extra ceiling, e.g. p99 under 1.5 ms


TARGETS = [
    Target("enqueue_single", "jobs_per_s", True, 1.5),
    Target("enqueue_bulk", "jobs_per_s", True, 1.5),
    Target("drain c=10", "jobs_per_s", True, 3.0),
    Target("pickup_latency", "p99_ms", False, 2.0, absolute=1.5),
]
TRACING_GOAL = 0.7  # drain with tracing on / off, Pauta's defaults


def emit(record: dict[str, Any]) -> None:
    print(json.dumps(record), flush=True)


class Database:
    """A fresh database on the server for one system, dropped at the end."""

    def __init__(self, server_url: str, system: str) -> None:
        self.server_url = server_url
        self.name = f"bench_{system.replace('-', '_').replace(':', '_')}_{secrets.token_hex(3)}"

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


Measure = Callable[[Any], dict[str, Any]]


def measurements(
    sizes: Sizes, receiver: "Receiver | None"
) -> list[tuple[str, dict[str, Any], Measure]]:
    def single(peer: Any) -> dict[str, Any]:
        return {"jobs_per_s": round(peer.enqueue_single(sizes.single), 1)}

    def bulk(peer: Any) -> dict[str, Any]:
        return {"jobs_per_s": round(peer.enqueue_bulk(sizes.bulk, 1000), 1)}

    def drain(peer: Any) -> dict[str, Any]:
        return {"jobs_per_s": round(peer.drain(sizes.drain, CONCURRENCY), 1)}

    def traced_drain(peer: Any) -> dict[str, Any]:
        """Drains with tracing off and on, alternating, TRACING_ROUNDS times each: a traced one
        lasts until every job is done and every attempt's span has reached the receiver. Its
        untraced reference is measured beside it, not minutes earlier with the other figures:
        this machine's speed moved by up to 1.25x between a run's untraced drain and its
        traced one (docs/benchmarks.md, "2026-12-03, evening")."""
        if receiver is None:
            raise RuntimeError("the traced drain needs the receiver")
        from bench.pauta_system import attempts_exported
        from bench.telemetry_overhead import otel_on

        on, off = [], []
        for _ in range(TRACING_ROUNDS):
            peer.runner_environment = {}
            peer.reset()
            off.append(peer.drain(sizes.drain, CONCURRENCY))
            peer.runner_environment = otel_on(receiver)
            peer.reset()
            exported = attempts_exported(receiver, sizes.drain)
            on.append(peer.drain(sizes.drain, CONCURRENCY, exported))
        return {
            "jobs_per_s": round(statistics.median(on), 1),
            "untraced_jobs_per_s": round(statistics.median(off), 1),
            "rounds_on": [round(value, 1) for value in on],
            "rounds_off": [round(value, 1) for value in off],
        }

    def single_relaxed(peer: Any) -> dict[str, Any]:
        with relaxed_commit(peer.dsn):
            return single(peer)

    def pickup(peer: Any) -> dict[str, Any]:
        summary = peer.pickup_latency(sizes.pickup, 0.010, CONCURRENCY)
        return {f"{key}_ms": round(value, 2) for key, value in summary.items()}

    return [
        ("enqueue_single", {"jobs": sizes.single}, single),
        ("enqueue_bulk", {"jobs": sizes.bulk, "batch": 1000}, bulk),
        ("drain c=10", {"jobs": sizes.drain, "concurrency": CONCURRENCY}, drain),
        ("pickup_latency", {"jobs": sizes.pickup, "interval_ms": 10}, pickup),
        (
            TRACED,
            {
                "jobs": sizes.drain,
                "concurrency": CONCURRENCY,
                "tracing": "otlp, every span received; off and on alternating",
            },
            traced_drain,
        ),
        (
            RELAXED,
            {"jobs": sizes.single, "synchronous_commit": "off (opt-in)"},
            single_relaxed,
        ),
    ]


@contextmanager
def relaxed_commit(dsn: str) -> Iterator[None]:
    """Every new session of ``dsn``'s database commits without waiting for the WAL flush, for
    any driver (the peers' own): ALTER DATABASE ... SET, reset afterwards."""
    name = sql.Identifier(make_url(dsn).database or "")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(name))
        try:
            yield
        finally:
            conn.execute(sql.SQL("ALTER DATABASE {} RESET synchronous_commit").format(name))


def entries(spec: str) -> list[tuple[str, str]]:
    """``pauta,pgqueuer:best`` -> [(system, profile)]; a bare name means all its profiles."""
    chosen: list[tuple[str, str]] = []
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, profile = item.partition(":")
        if name not in SYSTEMS:
            raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")
        offered = importlib.import_module(SYSTEMS[name]).Peer.PROFILES
        if profile and profile not in offered:
            raise ValueError(f"{name} has no profile {profile!r}; it has {', '.join(offered)}")
        chosen += [(name, each) for each in ([profile] if profile else offered)]
    if not chosen:
        raise ValueError(f"--systems names no system; choose from {', '.join(SYSTEMS)}")
    return chosen


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.run", description=__doc__)
    parser.add_argument("--dsn", help="server to use (default: DATABASE_URL or embedded)")
    parser.add_argument("--small", action="store_true", help="small sizes, for a quick check")
    parser.add_argument("--systems", default=DEFAULT_SYSTEMS)
    parser.add_argument("--label", default="", help="written into every line, e.g. run A")
    parser.add_argument("--spread", metavar="FILE", help="summarise the ratios of earlier runs")
    args = parser.parse_args(argv)
    if args.spread:
        return spread(args.spread)
    try:
        chosen = entries(args.systems)
    except ValueError as error:
        parser.error(str(error))
    sizes = SMALL if args.small else FULL
    if args.dsn:
        return run(args.dsn, chosen, sizes, args.label)
    with database_url() as (url, description):
        print(description, file=sys.stderr)
        return run(url, chosen, sizes, args.label)


@contextmanager
def tracing_receiver(needed: bool) -> Iterator["Receiver | None"]:
    """A real OTLP receiver on loopback for the traced drain (bench.telemetry_overhead's
    ``otel_on`` points a runner at it); None if no traced drain runs."""
    if not needed:
        yield None
        return
    from devtools.otlp_receiver import Receiver

    receiver = Receiver(keep_spans=False).start()  # counts spans by name, keeps none
    try:
        yield receiver
    finally:
        receiver.stop()


def run(server_url: str, chosen: list[tuple[str, str]], sizes: Sizes, label: str) -> int:
    peers: dict[tuple[str, str], Any] = {}
    databases: list[Database] = []
    results: dict[tuple[str, str, str], dict[str, Any]] = {}
    stamp = {"run": label} if label else {}
    traced = [("pauta", "defaults")] if ("pauta", "defaults") in chosen else []
    try:
        for name, profile in chosen:
            database = Database(server_url, f"{name}:{profile}")
            database.create()
            databases.append(database)
            peer = importlib.import_module(SYSTEMS[name]).Peer(database.url(), profile)
            peer.setup()
            peers[(name, profile)] = peer
        with tracing_receiver(bool(traced)) as receiver:
            for metric, details, measure in measurements(sizes, receiver):
                keys = selected(metric, list(peers), traced)
                taken = measure_rounds(metric, keys, peers, measure, stamp, details)
                for key, rounds in taken.items():
                    results[(*key, metric)] = figures = median_of(rounds)
                    emit({**header(peers[key], key, metric, stamp), **details, **figures})
    finally:
        for database in databases:
            database.drop()
    peer_names = peers_of(chosen)
    for profile in PROFILES:
        for target in TARGETS:
            emit({**stamp, **compare(target, profile, results, peer_names)})
    for target in TARGETS:
        if target.metric in FLOOR_METRICS:
            emit({**stamp, **against_floor(target, results, peer_names)})
    emit({**stamp, **tracing_cost(results)})
    emit({**stamp, **relaxed_enqueue(results, peer_names)})
    for target in TARGETS:
        emit({**stamp, **same_settings_twice(target, results)})
    emit({**stamp, **overhead("pauta-supervisor", "pauta", "drain c=10", results)})
    for variant in ("pauta", "pauta-limited"):
        emit({**stamp, **overhead(variant, "pauta-fifo", "drain c=10", results)})
    return 0


def peers_of(chosen: list[tuple[str, str]]) -> list[str]:
    """The peers among the chosen systems: neither Pauta's variants nor the floor."""
    return sorted({name for name, _ in chosen if name not in (*OURS, FLOOR)})


def header(peer: Any, key: tuple[str, str], metric: str, stamp: dict[str, str]) -> dict[str, Any]:
    return {
        **stamp,
        "system": peer.name,
        "profile": key[1],
        "knobs": peer.PROFILES[key[1]],
        "version": peer.version,
        "metric": metric,
    }


def measure_rounds(
    metric: str,
    keys: list[tuple[str, str]],
    peers: dict[tuple[str, str], Any],
    measure: Measure,
    stamp: dict[str, str],
    details: dict[str, Any],
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each chosen peer's figures, measured ENQUEUE_ROUNDS times for an enqueue metric (a
    bulk one lasts a fraction of a second, and one hiccup of the machine moved it by a fifth:
    docs/benchmarks.md), the peers taking turns within each round, once for any other. A
    peer that fails is reported and left out of the later rounds."""
    taken: dict[tuple[str, str], list[dict[str, Any]]] = {key: [] for key in keys}
    for _ in range(ENQUEUE_ROUNDS if metric.startswith("enqueue") else 1):
        for key in [key for key in keys if key in taken]:
            peer = peers[key]
            peer.reset()
            peer.runner_environment = {}
            try:
                taken[key].append(measure(peer))
            except Exception as error:  # one peer failing must not hide the others
                traceback.print_exc()
                failure = {"error": f"{type(error).__name__}: {error}"}
                emit({**header(peer, key, metric, stamp), **details, **failure})
                del taken[key]
    return taken


def median_of(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One round's figures as they are; several rounds' jobs per second as their median, with
    every round's."""
    if len(rounds) == 1:
        return rounds[0]
    values = [figures["jobs_per_s"] for figures in rounds]
    return {"jobs_per_s": round(statistics.median(values), 1), "rounds": values}


def selected(
    metric: str, peers: list[tuple[str, str]], traced: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Who a metric measures: the traced drain Pauta's defaults, the relaxed enqueue the best
    profiles of Pauta and the peers, the floor its FLOOR_METRICS, every other metric everyone
    else."""
    if metric == TRACED:
        return traced
    if metric not in FLOOR_METRICS:
        peers = [key for key in peers if key[0] != FLOOR]
    if metric == RELAXED:
        return [
            key for key in peers if key[1] == "best" and (key[0] == "pauta" or key[0] not in OURS)
        ]
    return peers


def relaxed_enqueue(
    results: dict[tuple[str, str, str], dict[str, Any]], peers: list[str]
) -> dict[str, Any]:
    """Pauta's single enqueue with the opt-in relaxed commit, against its durable one and the
    best peer's, durable (issue 16's figure) and relaxed alike."""
    record: dict[str, Any] = {"opt_in": RELAXED, "profile": "best", "field": "jobs_per_s"}
    relaxed = results.get(("pauta", "best", RELAXED), {}).get("jobs_per_s")
    durable = results.get(("pauta", "best", "enqueue_single"), {}).get("jobs_per_s")
    if not relaxed or not durable:
        return {**record, "verdict": "not measured"}
    record.update(pauta=relaxed, pauta_durable=durable, over_durable=round(relaxed / durable, 2))
    for figure, metric in (("durable", "enqueue_single"), ("relaxed", RELAXED)):
        theirs = {
            name: results[(name, "best", metric)]["jobs_per_s"]
            for name in peers
            if (name, "best", metric) in results
        }
        if theirs:
            best_peer = max(theirs, key=lambda name: theirs[name])
            record[f"over_best_peer_{figure}"] = round(relaxed / theirs[best_peer], 2)
            record[f"best_peer_{figure}"] = f"{best_peer} {theirs[best_peer]}"
    return record


def against_floor(
    target: Target, results: dict[tuple[str, str, str], dict[str, Any]], peers: list[str]
) -> dict[str, Any]:
    """The floor's figure (bench/floor_system.py) against the best peer's, as Pauta's is in
    ``compare`` (best profiles), with issue 16's goal: where the floor misses it, no queue on
    psycopg meets it on this machine. And Pauta's figure as a share of the floor's (1.0: Pauta
    does its job's work for nothing more than the floor's bare row)."""
    record: dict[str, Any] = {"floor": target.metric, "profile": "best", "field": target.field}
    floor = results.get((FLOOR, "best", target.metric), {}).get(target.field)
    ours = results.get(("pauta", "best", target.metric), {}).get(target.field)
    theirs = {
        name: results[(name, "best", target.metric)][target.field]
        for name in peers
        if (name, "best", target.metric) in results
    }
    if not floor or not ours or not theirs:
        return {**record, "verdict": "not measured"}
    pick = max if target.higher_is_better else min
    best_peer = pick(theirs, key=lambda name: theirs[name])
    if target.higher_is_better:
        ratio, share = floor / theirs[best_peer], ours / floor
    else:
        ratio, share = theirs[best_peer] / floor, floor / ours
    meets = ratio >= target.ratio and (target.absolute is None or floor < target.absolute)
    goal = f">= {target.ratio}x" + (f" and < {target.absolute}" if target.absolute else "")
    return {
        **record,
        "floor_value": floor,
        "best_peer": best_peer,
        "best_peer_value": theirs[best_peer],
        "floor_over_best_peer": round(ratio, 2),
        "goal": goal,
        "floor_meets_goal": meets,
        "pauta": ours,
        "pauta_share_of_floor": round(share, 2),
    }


def same_settings_twice(
    target: Target, results: dict[tuple[str, str, str], dict[str, Any]]
) -> dict[str, Any]:
    """Pauta's best profile over its defaults on one figure: while BEST is empty both run the
    same settings, so this ratio's distance from 1 is the run's own noise."""
    record: dict[str, Any] = {"noise": target.metric, "field": target.field}
    if importlib.import_module(SYSTEMS["pauta"]).BEST:
        return {**record, "verdict": "not measured: the profiles differ"}
    first = results.get(("pauta", "defaults", target.metric), {}).get(target.field)
    second = results.get(("pauta", "best", target.metric), {}).get(target.field)
    if not first or not second:
        return {**record, "verdict": "not measured"}
    return {**record, "defaults": first, "best": second, "ratio": round(second / first, 2)}


def tracing_cost(results: dict[tuple[str, str, str], dict[str, Any]]) -> dict[str, Any]:
    """Pauta's drain with tracing on (every attempt exported) over the same drain with it off,
    measured beside it (medians of the alternating rounds)."""
    record: dict[str, Any] = {"target": "tracing on/off", "profile": "defaults"}
    traced = results.get(("pauta", "defaults", TRACED), {})
    off = traced.get("untraced_jobs_per_s")
    on = traced.get("jobs_per_s")
    if not off or not on:
        return {**record, "verdict": "not measured"}
    ratio = on / off
    return {
        **record,
        "on": on,
        "off": off,
        "ratio": round(ratio, 2),
        "goal": f">= {TRACING_GOAL}",
        "met": ratio >= TRACING_GOAL,
    }


def overhead(
    variant: str, base: str, metric: str, results: dict[tuple[str, str, str], dict[str, Any]]
) -> dict[str, Any]:
    """A Pauta variant's drain against another's, both at defaults, in the same run: the
    supervisor against the bare runner; fair shares (pauta) and a rate limit far above the
    drain (pauta-limited) against the plain claim (pauta-fifo). Goal: >= 0.9x."""
    record: dict[str, Any] = {"target": f"{variant} / {base} {metric}", "field": "jobs_per_s"}
    plain = results.get((base, "defaults", metric), {}).get("jobs_per_s")
    measured = results.get((variant, "defaults", metric), {}).get("jobs_per_s")
    if not plain or not measured:
        return {**record, "verdict": "not measured"}
    ratio = measured / plain
    return {
        **record,
        variant: measured,
        base: plain,
        "ratio": round(ratio, 2),
        "goal": ">= 0.9x",
        "met": ratio >= 0.9,
    }


def compare(
    target: Target,
    profile: str,
    results: dict[tuple[str, str, str], dict[str, Any]],
    peers: list[str],
) -> dict[str, Any]:
    """Pauta in `profile` against the best of the peers in the same profile."""
    ours = results.get(("pauta", profile, target.metric), {}).get(target.field)
    theirs = {
        name: results[(name, profile, target.metric)][target.field]
        for name in peers
        if (name, profile, target.metric) in results
    }
    record: dict[str, Any] = {"target": target.metric, "profile": profile, "field": target.field}
    if ours is None or not theirs:
        return {**record, "verdict": "not measured"}
    pick = max if target.higher_is_better else min
    best_peer = pick(theirs, key=lambda name: theirs[name])
    ratio = ours / theirs[best_peer] if target.higher_is_better else theirs[best_peer] / ours
    compared = {
        **record,
        "pauta": ours,
        "best_peer": best_peer,
        "best_peer_value": theirs[best_peer],
        "ratio": round(ratio, 2),
    }
    if profile != "best":  # issue 16's goals are set against tuned peers
        return compared
    met = ratio >= target.ratio
    if target.absolute is not None:
        met = met and ours < target.absolute
    goal = f">= {target.ratio}x" + (f" and < {target.absolute}" if target.absolute else "")
    return {**compared, "goal": goal, "met": met}


def spread(path: str) -> int:
    """Each ratio's values over the runs recorded in `path`, and their spread (max/min - 1)."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    with open(path) as lines:
        for line in lines:
            record = json.loads(line)
            if "target" in record and "ratio" in record:
                values[(record["target"], record.get("profile", "defaults"))].append(
                    record["ratio"]
                )
    for (target, profile), ratios in values.items():
        low, high = min(ratios), max(ratios)
        emit({"target": target, "profile": profile, "ratios": ratios,
              "spread_pct": round((high / low - 1) * 100, 1)})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
