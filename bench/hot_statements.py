"""The enqueue path's hot statements, each way of running them measured in one run.

    DATABASE_URL=postgresql://... python -m bench.hot_statements [--jobs 20000] [--rounds 3]

On a scratch database of the server, alternating the variants round by round so that drift of
a shared machine affects each alike; prints one JSON line per variant (jobs per second, the
median of the rounds, and every round's figure):

- ``bulk``: ``job_insert_many`` (arrays unnested in one INSERT, what ``enqueue_many`` runs)
  against binary COPY of the same rows (ids reserved first, in one transaction: the fastest
  COPY variant tried; text COPY was slower still), at 1,000, 100 and 10 jobs per call;
- ``single``: ``job_insert`` with psycopg's server-side prepared statement (the default after
  five runs on a direct connection) against the same statement sent unprepared each time, as
  behind PgBouncer (``PAUTA_POOLER``), in one transaction per job and all in one transaction
  (where the commit's WAL flush no longer hides the statement's own cost);
- ``tenant_check``: what the tenant check costs per row of 1,000-job ``job_insert_many`` calls:
  once per statement (0021_tenant_check), the foreign key it replaced (row by row), and no
  check at all (the floor; not a mode Pauta offers);
- ``insert_trigger``: what ``jobs_after_insert()`` costs a one-job and a 1,000-job insert: a
  pass per tenant and queue (0023_insert_trigger_passes), its work in one statement
  (0022_insert_trigger), one statement per step (0021), and nothing; the 1,000 jobs of one
  tenant and queue, and of 50 tenants;
- ``claim``: ``job_claim`` of 10 and ``job_finish`` of them, over and over: the claim planned
  afresh at every call or its generic plan reused, with the tenant's foreign key or without;
- ``fair_claim``: the two claims side by side, ``job_claim_fair`` (the default) and
  ``job_claim``, each on a session set up as a worker's claiming link sets its own (JIT off,
  one generic plan, prepared at its first run): claiming 10 and finishing them over and over
  (a drain's shape), and claiming the one job just enqueued (a listener's shape, a pickup) with
  none and with 50,000 jobs scheduled for later in the queue. The statements take turns
  within each round, and pickup by pickup. Before 2026-12-04, night, the fair claim read every
  scheduled job of the tenant when it found fewer visible ones than its share, as a pickup's
  claim always does: 2.5 ms a claim with 50,000 scheduled (docs/benchmarks.md). Beside them,
  the listener's claim since 2026-12-05: ``job_claim_sole`` first, and the fair claim after it
  when the queue holds two jobs or more (a drain's queue always does; 50,000 scheduled jobs too);
- ``finish``: ``job_finish`` of batches of 1, 5 and 50 results (each batch claimed first on
  another connection), the call timed: sent unprepared (parsed, analysed and planned at every
  batch: the engine before 2026-12-02 night), prepared with PostgreSQL's own choice of plan
  (custom, or the generic plan once it estimates that no worse: now), and prepared with a
  custom plan forced at every call (parsed once, planned per batch). Each variant finishes
  ``--jobs`` / 100 batches of each size a round.

COPY is not in the engine: it measured no faster than the INSERT (the rows' cost is the
indexes and the foreign key, not parsing the statement), so it lives here as the measured
alternative.
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from bench.pages import scratch_database
from bench.profile_breakdown import migrate
from jobqueue import JobRequest
from jobqueue.enqueue import _payload_json, _prepare
from jobqueue.registry import TaskRegistry
from jobqueue.store import AttemptResult, JobStore

TASK = "bench_probe"


def batch(size: int) -> tuple[list[Any], list[str]]:
    requests = [JobRequest(TASK, {"seq": seq, "note": "hot statement"}) for seq in range(size)]
    tasks = TaskRegistry()
    payloads = [_payload_json(TASK, r.payload, 256 * 1024) for r in requests]
    return [_prepare(r, tasks) for r in requests], payloads


RESERVE = """
SELECT (SELECT id FROM tenants WHERE slug = 'system'), now(),
       ARRAY(SELECT nextval('jobs_id_seq') FROM generate_series(1, %(count)s))
"""
COPY = """
COPY jobs (id, tenant_id, queue, task, payload, priority, max_attempts, available_at,
           trace_context, timeout_seconds)
FROM STDIN (FORMAT BINARY)
"""
ADD_FOREIGN_KEY = (
    "ALTER TABLE jobs ADD CONSTRAINT jobs_tenant_id_fkey"
    " FOREIGN KEY (tenant_id) REFERENCES tenants (id)"
)

COPY_TYPES = ["int8", "int8", "text", "text", "jsonb", "int2", "int4", "timestamptz", "jsonb"]


def copy_jobs(conn: psycopg.Connection[Any], jobs: list[Any], payloads: list[str]) -> list[int]:
    """The COPY variant of job_insert_many: the same rows, the same trigger and constraint."""
    with conn.transaction():
        row = conn.execute(RESERVE, {"count": len(jobs)}).fetchone()
        assert row is not None
        system_tenant, now, ids = row
        with conn.cursor().copy(COPY) as copy:
            copy.set_types([*COPY_TYPES, "float8"])
            for job_id, job, payload in zip(ids, jobs, payloads, strict=True):
                available_at = job.run_at or now + timedelta(seconds=job.delay_seconds)
                copy.write_row(
                    (
                        job_id,
                        system_tenant if job.tenant_id is None else job.tenant_id,
                        job.queue,
                        job.task,
                        Jsonb(payload, dumps=_as_is),
                        job.priority,
                        job.max_attempts,
                        available_at,
                        None,
                        job.timeout_seconds,
                    )
                )
    return list(ids)


def _as_is(text: str) -> str:
    return text


def rate(action: Callable[[], Any], jobs: int, per_call: int) -> float:
    started = time.perf_counter()
    for _ in range(jobs // per_call):
        action()
    return jobs / (time.perf_counter() - started)


def emit(out: Any, record: dict[str, Any]) -> None:
    line = json.dumps(record)
    print(line, flush=True)
    if out is not None:
        out.write(line + "\n")


def bulk(url: str, jobs: int, rounds: int, out: Any) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        store = JobStore(conn)
        for size in (1000, 100, 10):
            new_jobs, payloads = batch(size)
            array = "[" + ",".join(payloads) + "]"
            figures: dict[str, list[float]] = {"job_insert_many": [], "binary COPY": []}
            for _ in range(rounds):
                conn.execute("TRUNCATE jobs CASCADE")
                figures["job_insert_many"].append(
                    rate(lambda: store.insert_jobs(new_jobs, array), jobs, size)  # noqa: B023
                )
                conn.execute("TRUNCATE jobs CASCADE")
                figures["binary COPY"].append(
                    rate(lambda: copy_jobs(conn, new_jobs, payloads), jobs, size)  # noqa: B023
                )
            for statement, values in figures.items():
                emit(out, _record("bulk", statement, values, batch=size))


def single(url: str, jobs: int, rounds: int, out: Any) -> None:
    new_job = _prepare(JobRequest(TASK, {"seq": 1}), TaskRegistry())
    payload = _payload_json(TASK, {"seq": 1}, 256 * 1024)
    figures: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for prepared in ("prepared", "unprepared"):
            threshold = 0 if prepared == "prepared" else None
            with psycopg.connect(url, autocommit=True, prepare_threshold=threshold) as conn:
                store = JobStore(conn)
                conn.execute("TRUNCATE jobs CASCADE")
                figures.setdefault((prepared, "one transaction per job"), []).append(
                    rate(lambda: store.insert_job(new_job, payload), jobs // 4, 1)  # noqa: B023
                )
                with conn.transaction():
                    figures.setdefault((prepared, "all in one transaction"), []).append(
                        rate(lambda: store.insert_job(new_job, payload), jobs, 1)  # noqa: B023
                    )
    for (prepared, transaction), values in figures.items():
        emit(out, _record("single", f"job_insert {prepared}", values, transactions=transaction))


def tenant_check(url: str, jobs: int, rounds: int, out: Any) -> None:
    """1,000-job ``job_insert_many`` calls with the tenant checked once per statement (migration
    0021), with the foreign key that checked it row by row before (and the statement trigger
    without the check), and with no check at all (the floor; not a mode Pauta offers). The
    older schemas are put in place inside a transaction that is rolled back."""
    new_jobs, payloads = batch(1000)
    array = "[" + ",".join(payloads) + "]"
    without_check = _migration("0021_tenant_check").AFTER_INSERT_BEFORE
    schemas = {
        "per-statement check (0021)": [],
        "per-row foreign key (before 0021)": [
            without_check,
            ADD_FOREIGN_KEY,
        ],
        "none (floor)": [without_check],
    }
    figures: dict[str, list[float]] = {name: [] for name in schemas}
    with psycopg.connect(url, autocommit=True) as conn:
        store = JobStore(conn)
        for _ in range(rounds):
            for name, statements in schemas.items():
                conn.execute("TRUNCATE jobs CASCADE")
                with conn.transaction(force_rollback=True):
                    for statement in statements:
                        conn.execute(statement)
                    figures[name].append(
                        rate(lambda: store.insert_jobs(new_jobs, array), jobs, 1000)
                    )
    for constraint, values in figures.items():
        emit(out, _record("tenant_check", constraint, values, batch=1000))


NO_TRIGGER_WORK = """
CREATE OR REPLACE FUNCTION jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END;
$$;
"""


def insert_trigger(url: str, jobs: int, rounds: int, out: Any) -> None:
    """What ``jobs_after_insert()`` costs a one-job enqueue (one transaction each, as
    bench.pauta_system's single enqueue) and a 1,000-job one, of one tenant or of 50: a pass
    per tenant and queue (0023), its work in one statement (0022), one statement per step
    (0021), and a function that does nothing (the floor; not a mode Pauta offers: no tenant
    check, no queue row, no wake-up). Each is put in place with CREATE OR REPLACE, alternating
    round by round; 0023's is put back at the end."""
    functions = {
        "a pass per tenant and queue (0023)": _migration("0023_insert_trigger_passes").AFTER_INSERT,
        "one statement (0022)": _migration("0022_insert_trigger").AFTER_INSERT,
        "one statement per step (0021)": _migration("0021_tenant_check").AFTER_INSERT,
        "does nothing (floor)": NO_TRIGGER_WORK,
    }
    new_job = _prepare(JobRequest(TASK, {"seq": 1}), TaskRegistry())
    payload = _payload_json(TASK, {"seq": 1}, 256 * 1024)
    new_jobs, payloads = batch(1000)
    array = "[" + ",".join(payloads) + "]"
    single_jobs = max(jobs // 10, 100)
    figures: dict[tuple[str, str], list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        store = JobStore(conn)
        tenants = [
            conn.execute(
                "INSERT INTO tenants (slug, name) VALUES (%s, %s) RETURNING id", (slug, slug)
            ).fetchone()[0]  # type: ignore[index]
            for slug in (f"bench-tenant-{n}" for n in range(50))
        ]
        spread = [
            replace(job, tenant_id=tenants[n % len(tenants)]) for n, job in enumerate(new_jobs)
        ]
        try:
            for _ in range(rounds):
                for name, function in functions.items():
                    conn.execute(function)
                    conn.execute("TRUNCATE jobs CASCADE")
                    rate(lambda: store.insert_job(new_job, payload), 100, 1)
                    figures.setdefault((name, "1"), []).append(
                        rate(lambda: store.insert_job(new_job, payload), single_jobs, 1)
                    )
                    figures.setdefault((name, "1000"), []).append(
                        rate(lambda: store.insert_jobs(new_jobs, array), jobs, 1000)
                    )
                    figures.setdefault((name, "1000 of 50 tenants"), []).append(
                        rate(lambda: store.insert_jobs(spread, array), jobs, 1000)
                    )
        finally:
            conn.execute(functions["a pass per tenant and queue (0023)"])
    for (name, size), values in figures.items():
        emit(out, _record("insert_trigger", name, values, batch=size))


def _migration(name: str) -> Any:
    path = Path(__file__).resolve().parent.parent / "migrations" / "versions" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# (label, the claim's plan_cache_mode, the tenant foreign key in place)
CLAIM_VARIANTS = [
    ("claim planned each call, per-row foreign key (before 2026-12-02)", "auto", True),
    ("claim's generic plan, per-row foreign key", "force_generic_plan", True),
    ("claim's generic plan, per-statement tenant check (now)", "force_generic_plan", False),
]


def claim(url: str, jobs: int, rounds: int, out: Any) -> None:
    """Claim 10 and finish them, over and over, on two connections as the runner does (its
    fetch link claims, its completer finishes), in three variants: the claim planned afresh at
    every call (what PostgreSQL chose on its own: each custom plan's estimate beat the generic
    one's) or its generic plan reused; and the tenant's foreign key in place (which also checked
    each job the finish moved out of jobs_live) or not (0021's check runs on inserts only)."""
    new_jobs, payloads = batch(1000)
    array = "[" + ",".join(payloads) + "]"
    figures: dict[str, list[float]] = {}
    medians: dict[str, list[float]] = {}
    for _ in range(rounds):
        for label, mode, foreign_key in CLAIM_VARIANTS:
            with (
                psycopg.connect(url, autocommit=True) as claiming,
                psycopg.connect(url, autocommit=True) as finishing,
            ):
                claiming.execute("SET jit = off")
                finishing.execute("SET jit = off")
                claiming.execute(f"SET plan_cache_mode = {mode}")
                claimer, finisher = JobStore(claiming), JobStore(finishing)
                finishing.execute("TRUNCATE jobs CASCADE")
                for _ in range(jobs // 1000):
                    finisher.insert_jobs(new_jobs, array)
                if foreign_key:
                    finishing.execute(ADD_FOREIGN_KEY)
                finishing.execute("VACUUM ANALYZE jobs_live")

                claim_ms: list[float] = []

                def cycle() -> None:
                    started = time.perf_counter()
                    claimed = claimer.claim("default", 10, "bench", 30.0)  # noqa: B023
                    claim_ms.append((time.perf_counter() - started) * 1000)  # noqa: B023
                    done = [AttemptResult(job, "succeeded", None, None, 0, 0) for job in claimed]
                    finisher.finish(done, "bench")  # noqa: B023

                figures.setdefault(label, []).append(rate(cycle, jobs, 10))
                medians.setdefault(label, []).append(statistics.median(claim_ms))
                if foreign_key:
                    finishing.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_tenant_id_fkey")
    for label, values in figures.items():
        emit(
            out,
            _record(
                "claim",
                label,
                values,
                batch=10,
                claim_ms_median=[round(m, 3) for m in medians[label]],
            ),
        )


# (variant, fair, sole_first): the listener's claim tries job_claim_sole first, and runs the
# fair claim after it when the queue holds two jobs or more
CLAIM_STATEMENTS = [
    ("job_claim_fair", True, False),
    ("job_claim", False, False),
    ("job_claim_sole, then job_claim_fair", True, True),
]
SCHEDULED = (0, 50_000)  # jobs scheduled for later, in the queue during the one-job claims
PICKUPS_VACUUM = 100  # one-job claims between two VACUUMs of jobs_live (the leader's)


def claiming_session(url: str) -> JobStore:
    """A store on a session set up as a worker's claiming link sets its own (jobqueue.connections,
    ``reuse_plans``): JIT off, one generic plan, prepared at the first run."""
    connection = psycopg.connect(url, autocommit=True, prepare_threshold=0)
    connection.execute("SET jit = off")
    connection.execute("SET plan_cache_mode = force_generic_plan")
    return JobStore(connection)


def fair_claim(url: str, jobs: int, rounds: int, out: Any) -> None:
    """``job_claim_fair`` against ``job_claim`` and the listener's claim (``CLAIM_STATEMENTS``):
    claim 10 and finish them until ``jobs`` are done, jobs per second; and ``jobs`` / 100
    pickups each (one job enqueued, then claimed with the 10 slots of a listener's claim, then
    finished), ms per claim, with each of ``SCHEDULED`` jobs scheduled an hour ahead. The
    statements take turns within each round (the drain's shape, one after the other) and
    pickup by pickup."""
    new_jobs, payloads = batch(1000)
    array = "[" + ",".join(payloads) + "]"
    later = [replace(job, delay_seconds=3600.0) for job in new_jobs]
    single_job, single_payload = new_jobs[0], payloads[0]
    batches: dict[str, list[float]] = {name: [] for name, _, _ in CLAIM_STATEMENTS}
    pickups: dict[tuple[str, int], list[list[float]]] = {}
    with psycopg.connect(url, autocommit=True) as feeding:
        feeder = JobStore(feeding)
        claimers = [
            (name, fair, sole, claiming_session(url)) for name, fair, sole in CLAIM_STATEMENTS
        ]
        try:
            for _ in range(rounds):
                feeding.execute("TRUNCATE jobs CASCADE")
                for _ in range(-(-len(CLAIM_STATEMENTS) * jobs // 1000)):  # enough for each
                    feeder.insert_jobs(new_jobs, array)
                feeding.execute("VACUUM ANALYZE jobs_live")
                for name, fair, sole, claimer in claimers:

                    def cycle(
                        claimer: JobStore = claimer, fair: bool = fair, sole: bool = sole
                    ) -> None:
                        claimed = claimer.claim_measured("default", 10, "bench", 30.0, fair, sole)[
                            0
                        ]
                        done = [
                            AttemptResult(job, "succeeded", None, None, 0, 0) for job in claimed
                        ]
                        feeder.finish(done, "bench")

                    batches[name].append(rate(cycle, jobs, 10))
                for scheduled in SCHEDULED:
                    feeding.execute("TRUNCATE jobs CASCADE")
                    for _ in range(scheduled // 1000):
                        feeder.insert_jobs(later, array)
                    feeding.execute("VACUUM ANALYZE jobs_live")
                    taken: dict[str, list[float]] = {name: [] for name, _, _ in CLAIM_STATEMENTS}
                    for pickup in range(max(jobs // 100, 10)):
                        for name, fair, sole, claimer in claimers:
                            feeder.insert_job(single_job, single_payload)
                            started = time.perf_counter()
                            claimed = claimer.claim_measured(
                                "default", 10, "bench", 30.0, fair, sole
                            )[0]
                            taken[name].append((time.perf_counter() - started) * 1000)
                            if len(claimed) != 1:
                                raise RuntimeError(f"{name} claimed {len(claimed)} jobs, not 1")
                            feeder.finish(
                                [AttemptResult(claimed[0], "succeeded", None, None, 0, 0)], "bench"
                            )
                        if pickup % PICKUPS_VACUUM == PICKUPS_VACUUM - 1:
                            feeding.execute("VACUUM jobs_live")
                    for name, values in taken.items():
                        pickups.setdefault((name, scheduled), []).append(values)
        finally:
            for _, _, _, claimer in claimers:
                claimer.connection.close()
    for name, values in batches.items():
        emit(out, _record("fair_claim", name, values, batch=10))
    for (name, scheduled), per_round in pickups.items():
        emit(
            out,
            {
                "measure": "fair_claim",
                "variant": name,
                "batch": "one job just enqueued, 10 slots",
                "scheduled": scheduled,
                "claim_ms_p50": round(
                    statistics.median(statistics.median(r) for r in per_round), 3
                ),
                "claim_ms_p99": round(statistics.median(_p99(r) for r in per_round), 3),
                "rounds_p50": [round(statistics.median(r), 3) for r in per_round],
            },
        )


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


# (label, psycopg's prepare threshold, the finishing session's plan_cache_mode)
FINISH_VARIANTS: list[tuple[str, int | None, str]] = [
    ("unprepared, planned per batch (before)", None, "auto"),
    ("prepared, PostgreSQL's choice of plan (now)", 5, "auto"),
    ("prepared, a custom plan per batch", 5, "force_custom_plan"),
]


def finish(url: str, jobs: int, rounds: int, out: Any) -> None:
    """``job_finish`` of batches of 1, 5 and 50, each variant on a connection of its own, the
    variants taking turns batch by batch; µs per call (its commit included)."""
    new_jobs, payloads = batch(50)
    for size in (1, 5, 50):
        jobs_of_size, array = new_jobs[:size], "[" + ",".join(payloads[:size]) + "]"
        per_round: dict[str, list[float]] = {label: [] for label, *_ in FINISH_VARIANTS}
        for _ in range(rounds):
            with psycopg.connect(url, autocommit=True) as feeding:
                feeder = JobStore(feeding)
                stores = []
                for label, threshold, mode in FINISH_VARIANTS:
                    connection = psycopg.connect(url, autocommit=True, prepare_threshold=threshold)
                    connection.execute("SET jit = off")
                    connection.execute(f"SET plan_cache_mode = {mode}")
                    stores.append((label, JobStore(connection)))
                calls: dict[str, list[float]] = {label: [] for label, *_ in FINISH_VARIANTS}
                try:
                    for _ in range(max(jobs // 100, 10)):
                        for label, store in stores:
                            feeder.insert_jobs(jobs_of_size, array)
                            claimed = feeder.claim("default", size, "bench", 30.0)
                            results = [
                                AttemptResult(job, "succeeded", None, None, 0, 0) for job in claimed
                            ]
                            started = time.perf_counter()
                            store.finish(results, "bench")
                            calls[label].append((time.perf_counter() - started) * 1e6)
                finally:
                    for _, store in stores:
                        store.connection.close()
            for label, values in calls.items():
                per_round[label].append(statistics.median(values[5:]))  # the first five: unprepared
        for label, values in per_round.items():
            emit(
                out,
                {
                    "measure": "finish",
                    "variant": label,
                    "batch": size,
                    "us_per_call": round(statistics.median(values)),
                    "rounds": [round(v) for v in values],
                },
            )


def _record(measure: str, variant: str, values: list[float], **details: Any) -> dict[str, Any]:
    return {
        "measure": measure,
        "variant": variant,
        **details,
        "jobs_per_s": round(statistics.median(values)),
        "rounds": [round(v) for v in values],
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench.hot_statements", description=__doc__)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only",
        choices=(
            "bulk",
            "single",
            "tenant_check",
            "insert_trigger",
            "claim",
            "fair_claim",
            "finish",
        ),
    )
    parser.add_argument("--out", help="also append the JSON lines to this file")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.rounds < 1:
        parser.error("--jobs and --rounds must be at least 1")
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit("set DATABASE_URL to a PostgreSQL server (a scratch database is made)")
    out = open(args.out, "a") if args.out else None
    try:
        with scratch_database(server) as url:
            migrate(url)
            for name, measure in (
                ("bulk", bulk),
                ("single", single),
                ("tenant_check", tenant_check),
                ("insert_trigger", insert_trigger),
                ("claim", claim),
                ("fair_claim", fair_claim),
                ("finish", finish),
            ):
                if args.only in (None, name):
                    measure(url, args.jobs, args.rounds, out)
    finally:
        if out is not None:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
