"""A month of churn, compressed: N jobs through one PostgreSQL server in one run (issue 13).

    python -m bench.soak [--jobs 5000000] [--sample-seconds 30] [--autovacuum off]
                         [--out docs/benchmarks/DATE-soak-N.jsonl]   (`make soak`)

On a cluster of its own (devtools.cluster: fsync, synchronous commit and autovacuum on, as in
production; ``--autovacuum off`` turns it off to show the leader's VACUUM fallback holding the
rate), it runs one Pauta runner process (what ``worker.py --single`` runs, leader duties
included) and a producer that keeps the backlog near ``--backlog`` jobs, so the jobs go
through at the engine's sustained rate. The mix, by job number: 90% no-op, 5% failing once
and succeeding on the retry, 1% dead at their first failure, 4% scheduled 1 to 10 s ahead.
Retention runs as in production, with a day compressed to ``--day-seconds`` (60: succeeded
jobs are kept a minute, dead ones 14, statistics 30, history partitions an "hour" each, 2.5 s,
dropped whole once expired) and the leader pruning every ``--prune-seconds``.

Every ``--sample-seconds`` one JSON line: the drain rate (jobs finished per second since the
last sample: enqueued minus those still available or running), the claim's p50/p99 timed in
the runner around the real claim statement (and its mean on the server from
pg_stat_statements), the size of every table, partition and index of the engine
(``pg_relation_size``; ``jobs`` is read through ``pg_partition_tree`` so the figures hold
whether or not it is partitioned), the live table (the relation holding available jobs) and
its indexes, dead tuples and vacuum/autovacuum counts (``pg_stat_user_tables``),
``pgstattuple_approx`` of the live table, and what the machine gave (bench.machine: CPU time a
second of the runner, this process and the server's processes, steal, idle, and a fixed loop's
CPU time, which tells a slower machine from a slower engine). At the end: the target check
(last tenth within 10% of the first tenth on drain rate and claim p99; live table and indexes
under ``--bound-mb``), the machine's first and last tenth, and a plot of the series (PNG beside
the JSON lines).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.machine import MachineMeter
from bench.soak_tasks import DEAD, NOOP, RETRIED
from devtools.cluster import Cluster
from jobqueue import JobRequest, enqueue_many

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1000
# How often the producer counts the backlog while it is full: each count reads the backlog's
# index entries, so polling every 50 ms (as the first 300,000-job run did) cost the server a
# visible share of its CPU.
PRODUCER_POLL_SECONDS = 0.5
DAY = 86_400.0

SERVER = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.track": "top",
    "pg_stat_statements.track_planning": "on",
    "track_counts": "on",
}

BACKLOG_SQL = "SELECT count(*) FROM jobs WHERE state IN ('available', 'running')"
LIVE_RELATION_SQL = "SELECT tableoid::regclass::text FROM jobs WHERE state = 'available' LIMIT 1"
# Every table, partition and index in the engine's schema, with its size (those dropped while
# this reads them, which pg_relation_size answers with NULL, left out).
SIZES_SQL = """
SELECT c.relname, c.relkind, pg_relation_size(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'i', 'I', 't', 'm')
  AND pg_relation_size(c.oid) IS NOT NULL
ORDER BY c.relname
"""
# jobs and, if it is partitioned, all its partitions (pg_partition_tree lists a plain table
# only when it is part of a partition tree): heap and indexes.
JOBS_TREE_SQL = """
SELECT coalesce(sum(pg_relation_size(c.oid)), 0), coalesce(sum(pg_indexes_size(c.oid)), 0),
       count(*)
FROM pg_class c
WHERE c.relkind = 'r'
  AND c.oid IN (SELECT relid FROM pg_partition_tree('jobs') UNION SELECT 'jobs'::regclass)
"""
# Checkpoints (on time, or asked for by WAL volume) and buffers written by the checkpointer, the
# background writer and the backends themselves (a backend that must evict a dirty buffer).
BGWRITER_SQL = """
SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint, buffers_clean, buffers_backend,
       buffers_alloc
FROM pg_stat_bgwriter
"""
TABLE_STATS_SQL = """
SELECT relname, n_live_tup, n_dead_tup, vacuum_count, autovacuum_count, autoanalyze_count
FROM pg_stat_user_tables WHERE schemaname = 'public'
"""
# The engine's statements by what they do, told apart by text that pg_stat_statements keeps
# (it replaces parameters and literals by $n).
STATEMENT_GROUPS_SQL = """
SELECT CASE
           WHEN query ILIKE '%locked_bucket AS%' THEN 'claim'
           WHEN query ILIKE '%locked.retry_delay%' THEN 'finish'
           WHEN query ILIKE '%WITH held AS%' THEN 'heartbeat'
           WHEN query ILIKE '%jsonb_array_elements%' THEN 'enqueue'
           WHEN query ILIKE '%DELETE FROM jobs_dead%' THEN 'prune'
           WHEN query ILIKE '%FROM history_partitions(%' THEN 'upkeep'
           WHEN ltrim(regexp_replace(query, '--[^\n]*', '', 'g')) ILIKE 'vacuum%' THEN 'vacuum'
           ELSE 'other'
       END AS name,
       sum(calls), sum(total_exec_time), sum(total_plan_time)
FROM pg_stat_statements
GROUP BY 1
"""


def request(seq: int) -> JobRequest:
    """The mix, by job number: 90% no-op, 5% retried once, 1% dead, 4% scheduled ahead."""
    kind = seq % 100
    if kind < 90:
        return JobRequest(NOOP, {"seq": seq})
    if kind < 95:
        return JobRequest(RETRIED, {"seq": seq})
    if kind < 96:
        return JobRequest(DEAD, {"seq": seq})
    return JobRequest(NOOP, {"seq": seq}, delay=1.0 + seq % 10)


class Producer(threading.Thread):
    """Enqueues `total` jobs in calls of BATCH, whenever fewer than `backlog` wait or run."""

    def __init__(self, url: str, total: int, backlog: int) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.url = url
        self.total = total
        self.backlog = backlog
        self.enqueued = 0
        self.lock = threading.Lock()  # held while a batch is enqueued and counted
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while self.enqueued < self.total:
                    row = conn.execute(BACKLOG_SQL).fetchone()
                    if row and row[0] >= self.backlog:
                        time.sleep(PRODUCER_POLL_SECONDS)
                        continue
                    last = min(self.enqueued + BATCH, self.total)
                    requests = [request(seq) for seq in range(self.enqueued, last)]
                    with self.lock:
                        enqueue_many(conn, requests)
                        self.enqueued = last
        except BaseException as error:  # reported by the sampler, which stops the run
            self.error = error


class Sampler:
    """One record per interval, read from the server and the runner's claim timings."""

    def __init__(self, url: str, claims: Path, producer: Producer, machine: MachineMeter) -> None:
        self.conn = psycopg.connect(url, autocommit=True)
        self.claims = claims
        self.producer = producer
        self.machine = machine
        self.started = time.monotonic()
        self.last_time = self.started
        self.last_finished = 0
        self.claims_read = 0  # bytes of the claims file already read
        self.last_statements: dict[str, tuple[float, float]] = {}
        self.last_plans: dict[str, float] = {}
        self.live_relation = "jobs"
        self.pgstattuple = self._extension("pgstattuple")
        self.statements = self._extension("pg_stat_statements")

    def _extension(self, name: str) -> bool:
        try:
            self.conn.execute(f"CREATE EXTENSION IF NOT EXISTS {name}")
        except psycopg.Error as error:
            print(f"soak: no {name} ({error}); its figures are left out", file=sys.stderr)
            return False
        return True

    def _claim_timings(self) -> list[float]:
        """Claim durations (ms) the runner wrote since the last sample."""
        with self.claims.open("rb") as timings:
            timings.seek(self.claims_read)
            chunk = timings.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]  # leave a line still being written
        self.claims_read += len(complete)
        return [float(value) for value in complete.split()]

    def sample(self) -> dict[str, Any]:
        now = time.monotonic()
        with self.producer.lock:  # no batch half counted: finished = enqueued - waiting
            row = self.conn.execute(BACKLOG_SQL).fetchone()
            enqueued = self.producer.enqueued
        backlog = int(row[0]) if row else 0
        finished = enqueued - backlog
        elapsed = now - self.last_time
        rate = (finished - self.last_finished) / elapsed if elapsed > 0 else 0.0
        self.last_time, self.last_finished = now, finished
        record: dict[str, Any] = {
            "t": round(now - self.started, 1),
            "at": datetime.now(UTC).isoformat(timespec="seconds"),
            "enqueued": enqueued,
            "backlog": backlog,
            "finished": finished,
            "drain_per_s": round(rate, 1),
            "machine": self.machine.read(),
        }
        timings = self._claim_timings()
        if len(timings) >= 2:
            cuts = statistics.quantiles(timings, n=100, method="inclusive")
            record.update(
                claims=len(timings),
                claim_p50_ms=round(cuts[49], 3),
                claim_p99_ms=round(cuts[98], 3),
            )
        if self.statements:
            rows = self.conn.execute(STATEMENT_GROUPS_SQL).fetchall()
            groups = {name: (float(calls), float(total)) for name, calls, total, _ in rows}
            plans = {name: float(planning) for name, _, _, planning in rows}
            calls, total = groups.get("claim", (0.0, 0.0))
            last_calls, last_total = self.last_statements.get("claim", (0.0, 0.0))
            if calls > last_calls:
                mean = (total - last_total) / (calls - last_calls)
                record["claim_server_mean_ms"] = round(mean, 3)
            # the server's time in each kind of statement since the last sample, in ms a second
            record["server_ms_per_s"] = {
                name: round((total - self.last_statements.get(name, (0.0, 0.0))[1]) / elapsed, 1)
                for name, (_, total) in sorted(groups.items())
            }
            # and planning them (each statement that is not a prepared generic plan)
            record["server_plan_ms_per_s"] = {
                name: round((planning - self.last_plans.get(name, 0.0)) / elapsed, 1)
                for name, planning in sorted(plans.items())
            }
            self.last_statements, self.last_plans = groups, plans
        found = self.conn.execute(LIVE_RELATION_SQL).fetchone()
        if found:
            self.live_relation = found[0]
        sizes = {name: (kind, size) for name, kind, size in self.conn.execute(SIZES_SQL)}
        record["sizes"] = {name: size for name, (_, size) in sizes.items()}
        heap, indexes, leaves = self.conn.execute(JOBS_TREE_SQL).fetchone() or (0, 0, 0)
        record.update(
            jobs_heap_bytes=int(heap), jobs_indexes_bytes=int(indexes), jobs_partitions=int(leaves)
        )
        live = self.conn.execute(
            "SELECT pg_relation_size(%(r)s::regclass), pg_indexes_size(%(r)s::regclass)",
            {"r": self.live_relation},
        ).fetchone() or (0, 0)
        record.update(
            live_relation=self.live_relation,
            live_heap_bytes=int(live[0]),
            live_indexes_bytes=int(live[1]),
        )
        names = ("checkpoints_timed", "checkpoints_req", "buffers_checkpoint", "buffers_clean",
                 "buffers_backend", "buffers_alloc")  # fmt: skip
        counts = self.conn.execute(BGWRITER_SQL).fetchone() or ()
        record["bgwriter"] = dict(zip(names, (int(count) for count in counts), strict=False))
        record["tables"] = {
            name: {
                "live": live_rows,
                "dead": dead,
                "vacuums": vacuums,
                "autovacuums": autovacuums,
                "autoanalyzes": analyzes,
            }
            for name, live_rows, dead, vacuums, autovacuums, analyzes in self.conn.execute(
                TABLE_STATS_SQL
            )
        }
        if self.pgstattuple:
            approx = self.conn.execute(
                "SELECT dead_tuple_percent, approx_free_percent FROM pgstattuple_approx(%s)",
                (self.live_relation,),
            ).fetchone()
            if approx:
                record.update(
                    live_dead_tuple_pct=round(float(approx[0]), 2),
                    live_free_pct=round(float(approx[1]), 2),
                )
        return record


def migrate(url: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "SECRET_KEY": "soak"},
        check=True,
        capture_output=True,
    )
    # The migration made the history partitions of the next two (real) hours; a partition
    # period cannot be split while one covers it, so the empty ones make way for the runner's
    # compressed hours.
    with psycopg.connect(url, autocommit=True) as conn:
        for (name,) in conn.execute(
            "SELECT child.relname FROM pg_inherits JOIN pg_class AS child"
            " ON child.oid = pg_inherits.inhrelid"
            " WHERE pg_inherits.inhparent IN ('jobs_done'::regclass, 'job_attempts'::regclass)"
            " AND pg_get_expr(child.relpartbound, child.oid) <> 'DEFAULT'"
        ).fetchall():
            conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(name)))


def run_runner(argv: Sequence[str]) -> None:
    """The runner process: Pauta's Runner on queue `default` with retention compressed, its
    claims timed (milliseconds, one line each, appended to the claims file); stopped by
    SIGTERM."""
    from jobqueue.runner import Runner
    from jobqueue.settings import WorkerSettings
    from jobqueue.store import JobStore

    url, threads, claims, day, prune, keep_dead_days = argv
    out = open(claims, "a", buffering=1)
    claim = JobStore.claim

    def timed_claim(store: JobStore, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return claim(store, *args, **kwargs)
        finally:
            out.write(f"{(time.perf_counter() - started) * 1000.0:.3f}\n")

    JobStore.claim = timed_claim  # type: ignore[method-assign]
    day_seconds = float(day)
    settings = WorkerSettings(
        database_url=url,
        queues={"default": int(threads)},
        keep_succeeded_seconds=day_seconds,
        keep_dead_seconds=float(keep_dead_days) * day_seconds,
        keep_stats_seconds=30 * day_seconds,
        prune_seconds=float(prune),
        history_partition_seconds=day_seconds / 24,  # hourly, compressed with the day
    )
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    runner = Runner(settings)
    runner.start()
    signal.sigwait({signal.SIGTERM})
    runner.stop()


def tenth_means(samples: list[dict[str, Any]], field: str) -> tuple[float, float] | None:
    values = [sample[field] for sample in samples if field in sample]
    if len(values) < 10:
        return None
    tenth = len(values) // 10
    return statistics.fmean(values[:tenth]), statistics.fmean(values[-tenth:])


def verdict(samples: list[dict[str, Any]], bound_mb: float) -> dict[str, Any]:
    """The targets: the last tenth within 10% of the first on drain rate and claim p99, over
    the steady part of the run (from the second interval in which jobs finished, so the
    runner's start is left out, to the last sample taken while the producer still ran, so the
    final drain-down is too), and the live table with its indexes under `bound_mb` throughout."""
    started = next((i for i, sample in enumerate(samples) if sample["finished"] > 0), None)
    steady = [] if started is None else [s for s in samples[started + 1 :] if s["producing"]]
    result: dict[str, Any] = {"summary": True, "samples": len(samples), "steady": len(steady)}
    for field, higher_is_better in (("drain_per_s", True), ("claim_p99_ms", False)):
        means = tenth_means(steady, field)
        if means is None or not means[0]:
            result[field] = "too few samples (10 needed)"
            continue
        first, last = means
        change = (last - first) / first
        held = change >= -0.10 if higher_is_better else change <= 0.10
        result[field] = {
            "first_tenth": round(first, 2),
            "last_tenth": round(last, 2),
            "change_pct": round(change * 100, 1),
            "met": held,
        }
    result["machine"] = machine_tenths(steady)
    peak = max((s["live_heap_bytes"] + s["live_indexes_bytes"] for s in samples), default=0)
    result["live_peak_mb"] = round(peak / 2**20, 1)
    result["bound_mb"] = bound_mb
    result["live_under_bound"] = peak <= bound_mb * 2**20
    return result


def machine_tenths(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The first and last tenth's means of what the machine gave: the probe's CPU time, steal,
    CPU time per finished job of the runner and of the server, and the server's CPU time over
    the runner's (the runner's work per no-op job is always the same: against it, the server's
    shows the engine's cost apart from the machine's speed)."""
    rows = [
        s
        for s in samples
        if "machine" in s and s["drain_per_s"] > 0 and s["machine"]["cpu_s_per_s"]["runner"] > 0
    ]
    if len(rows) < 10:
        return {}
    figures = {
        "probe_ms": lambda s: s["machine"]["probe_ms"],
        "steal_pct": lambda s: s["machine"]["steal_pct"],
        "runner_us_per_job": lambda s: (
            s["machine"]["cpu_s_per_s"]["runner"] / s["drain_per_s"] * 1e6
        ),
        "server_us_per_job": lambda s: (
            s["machine"]["cpu_s_per_s"]["server"] / s["drain_per_s"] * 1e6
        ),
        "server_per_runner_cpu": lambda s: (
            s["machine"]["cpu_s_per_s"]["server"] / s["machine"]["cpu_s_per_s"]["runner"]
        ),
    }
    tenth = len(rows) // 10
    return {
        name: {
            figure: round(statistics.fmean(map(read, part)), 2) for figure, read in figures.items()
        }
        for name, part in (("first_tenth", rows[:tenth]), ("last_tenth", rows[-tenth:]))
    }


def history_heap_bytes(sizes: dict[str, int], parent: str) -> int:
    """The heap of a table and its partitions (``parent``, ``parent_*``), not their indexes."""
    return sum(
        size or 0  # None in the lines of runs before the NULL sizes were left out
        for name, size in sizes.items()
        if (name == parent or name.startswith(parent + "_")) and not name.endswith(("_idx", "_key"))
    )


def plot(samples: list[dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [sample["t"] / 60 for sample in samples]
    figure, axes = plt.subplots(5, 1, figsize=(10, 16), sharex=True)
    axes[0].plot(minutes, [s["drain_per_s"] for s in samples], label="drain, jobs/s")
    axes[0].set_ylabel("jobs/s")
    axes[1].plot(minutes, [s.get("claim_p50_ms") for s in samples], label="claim p50")
    axes[1].plot(minutes, [s.get("claim_p99_ms") for s in samples], label="claim p99")
    axes[1].plot(
        minutes, [s.get("claim_server_mean_ms") for s in samples], label="claim mean on the server"
    )
    axes[1].set_ylabel("ms")
    megabytes = 2**20
    axes[2].plot(minutes, [s["jobs_heap_bytes"] / megabytes for s in samples], label="jobs heap")
    axes[2].plot(
        minutes, [s["jobs_indexes_bytes"] / megabytes for s in samples], label="jobs indexes"
    )
    axes[2].plot(
        minutes,
        [(s["live_heap_bytes"] + s["live_indexes_bytes"]) / megabytes for s in samples],
        label="live table + indexes",
    )
    # job_attempts and jobs_done are partitioned: their heaps are their partitions' (the parent
    # holds nothing), indexes left out
    for parent in ("job_attempts", "jobs_done"):
        axes[2].plot(
            minutes,
            [history_heap_bytes(s["sizes"], parent) / megabytes for s in samples],
            label=f"{parent} heap (all partitions)",
        )
    axes[2].set_ylabel("MB")
    for table in ("jobs_live", "jobs_dead", "job_attempts_default"):
        axes[3].plot(
            minutes,
            [s["tables"].get(table, {}).get("dead", 0) for s in samples],
            label=f"dead tuples, {table}",
        )
    vacuums = [sum(t["autovacuums"] + t["vacuums"] for t in s["tables"].values()) for s in samples]
    twin = axes[3].twinx()
    twin.step(minutes, vacuums, color="grey", where="post", label="vacuum runs (all tables)")
    twin.set_ylabel("vacuum runs")
    twin.legend(loc="upper right")
    axes[3].set_ylabel("dead tuples")
    names = sorted({name for s in samples for name in s.get("server_ms_per_s", {})})
    for name in names:
        axes[4].plot(minutes, [s.get("server_ms_per_s", {}).get(name) for s in samples], label=name)
    axes[4].set_ylabel("server ms per second")
    axes[4].set_xlabel("minutes")
    for axis in (*axes[:3], axes[4]):
        axis.legend(loc="upper left")
    axes[3].legend(loc="upper left")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--runner"]:
        run_runner(argv[1:])
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m bench.soak",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=5_000_000)
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument("--autovacuum", choices=("on", "off"), default="on")
    parser.add_argument("--threads", type=int, default=10, help="the runner's threads")
    parser.add_argument("--backlog", type=int, default=20_000, help="jobs kept waiting")
    parser.add_argument("--day-seconds", type=float, default=60.0, help="a day, compressed")
    parser.add_argument("--prune-seconds", type=float, default=10.0)
    parser.add_argument(
        "--keep-dead-days", type=float, default=14.0, help="dead jobs' retention, in days"
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting for the cluster, e.g. shared_buffers=2GB (repeatable)",
    )
    parser.add_argument(
        "--bound-mb",
        type=float,
        default=256.0,
        help="the live table and its indexes must stay under this",
    )
    parser.add_argument("--out", type=Path, help="JSON lines (default: docs/benchmarks/...)")
    args = parser.parse_args(argv)
    for name in ("jobs", "sample_seconds", "threads", "backlog", "day_seconds", "prune_seconds",
                 "keep_dead_days", "bound_mb"):  # fmt: skip
        if getattr(args, name) <= 0:
            option = "--" + name.replace("_", "-")
            parser.error(f"{option} must be above 0, not {getattr(args, name)}")
    label = f"{datetime.now(UTC):%Y-%m-%d}-soak-{args.jobs}-autovacuum-{args.autovacuum}"
    out = args.out or ROOT / "docs" / "benchmarks" / f"{label}.jsonl"
    server = {**SERVER, "autovacuum": args.autovacuum}
    for setting in args.setting:
        name, equals, value = setting.partition("=")
        if not equals or not name.strip() or not value.strip():
            parser.error(f"--setting takes NAME=VALUE, e.g. shared_buffers=2GB, not {setting!r}")
        server[name.strip()] = "'" + value.strip().replace("'", "''") + "'"
    with Cluster(server) as cluster:
        url = cluster.create_database("soak")
        migrate(url)
        claims = cluster.folder / "claims"
        claims.touch()
        log = (cluster.folder / "runner.log").open("wb")
        runner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.soak",
                "--runner",
                url,
                str(args.threads),
                str(claims),
                str(args.day_seconds),
                str(args.prune_seconds),
                str(args.keep_dead_days),
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        producer = Producer(url, args.jobs, args.backlog)
        postmaster = int((cluster.data / "postmaster.pid").read_text().split("\n", 1)[0])
        meter = MachineMeter({"runner": runner.pid, "soak": os.getpid()}, postmaster)
        sampler = Sampler(url, claims, producer, meter)
        samples: list[dict[str, Any]] = []
        header = {
            "soak": label,
            "jobs": args.jobs,
            "autovacuum": args.autovacuum,
            "threads": args.threads,
            "backlog": args.backlog,
            "day_seconds": args.day_seconds,
            "prune_seconds": args.prune_seconds,
            "keep_dead_days": args.keep_dead_days,
            "history_partition_seconds": args.day_seconds / 24,
            "sample_seconds": args.sample_seconds,
            "server": server,
        }
        try:
            producer.start()
            with out.open("w") as lines:
                lines.write(json.dumps(header) + "\n")
                while True:
                    time.sleep(args.sample_seconds)
                    producing = producer.is_alive()
                    if producer.error is not None:
                        raise RuntimeError("the producer failed") from producer.error
                    if runner.poll() is not None:
                        raise RuntimeError(f"the runner exited ({runner.returncode}); see log")
                    record = {**sampler.sample(), "producing": producing}
                    samples.append(record)
                    lines.write(json.dumps(record) + "\n")
                    lines.flush()
                    print(
                        json.dumps(
                            {
                                key: record.get(key)
                                for key in (
                                    "t",
                                    "finished",
                                    "backlog",
                                    "drain_per_s",
                                    "claim_p50_ms",
                                    "claim_p99_ms",
                                    "live_heap_bytes",
                                    "live_indexes_bytes",
                                )
                            }
                        ),
                        flush=True,
                    )
                    if not producing and record["backlog"] == 0:
                        break
                summary = verdict(samples, args.bound_mb)
                lines.write(json.dumps(summary) + "\n")
        finally:
            runner.terminate()
            runner.wait(30)
            sampler.conn.close()
    print(json.dumps(summary), flush=True)
    plot(samples, out.with_suffix(".png"), f"{label}: {args.jobs:,} jobs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
