"""JobStore: runs the named statements of queries.sql on one psycopg connection.

The store never commits: whoever owns the connection owns the transaction. The runner's own
connections are in autocommit mode, so each statement is its own transaction; an enqueue made
through a caller's connection joins the caller's transaction.
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.rows import dict_row

from jobqueue.errors import OperationRefused
from jobqueue.queries import all_queries

_T = TypeVar("_T")

# How often an operator's write is run again after a row it waited for moved partitions.
_MOVED_ROW_RETRIES = 2

# The console's multi-row writes, planned afresh for each batch (never prepared). The runner's
# batch writes (job_finish, job_release, job_extend_leases) are prepared like any statement:
# driven by a LATERAL look-up per row, their generic plan has the custom plan's shape, which
# tests/jobqueue/test_batch_plans.py checks in both, and a prepared job_finish spares the server
# its parsing and analysis at every batch (0.47 ms of a 2.04 ms one-result call,
# `bench.hot_statements --only finish`).
PLANNED_PER_BATCH = frozenset({"job_discard", "job_requeue_many"})


class ClaimedJob(NamedTuple):
    """A job a claim took, as its row read. A named tuple: immutable (a task sees it as
    ``ctx.job``), and made in 0.22 µs where a frozen dataclass, which sets each of its twelve
    fields through ``object.__setattr__``, took 1.08 (docs/benchmarks.md, "2026-12-05,
    morning")."""

    id: int
    tenant_id: int
    queue: str
    task: str
    payload: Any
    priority: int
    attempt: int
    max_attempts: int
    available_at: datetime
    started_at: datetime
    trace_context: dict[str, str] | None = None  # W3C traceparent/tracestate of the enqueue
    timeout_seconds: float | None = None  # given at enqueue; None: the task's or the default


PAYLOAD_COLUMN = 4  # the claims' RETURNING lists ClaimedJob's fields in order
PAYLOAD_SAMPLE = 16  # rows of a claim whose payload's size is read (each read copies it)


@dataclass(frozen=True, slots=True)
class RescuedJob:
    id: int
    queue: str
    state: str  # 'available' (a retry) or 'dead' (out of attempts)
    worker: str  # whose lease expired


class Written(NamedTuple):
    """What became of one attempt result that ``JobStore.finish`` was given (a named tuple, as
    :class:`ClaimedJob` is: one is made for every result)."""

    state: str | None  # the job's state now (None if the job no longer exists)
    how: str  # 'written' now, 'written_before' (an earlier try committed), or 'lost'


@dataclass(frozen=True, slots=True)
class Term:
    """A leadership term: which duty, who holds it, and its number (see ``leader_elect``)."""

    name: str
    holder: str
    number: int

    def params(self) -> dict[str, Any]:
        return {"name": self.name, "holder": self.holder, "term": self.number}


@dataclass(frozen=True, slots=True)
class WorkerIdentity:
    """Who a worker process is, as registered in the workers table."""

    name: str  # what jobs.locked_by holds
    hostname: str
    pid: int
    parent_id: int | None  # the supervisor's row, for a queue child
    queue: str | None  # None for a supervisor
    threads: int


@dataclass(slots=True)
class NewJob:
    """One row to insert, checked; see jobqueue.enqueue for the public way to build these."""

    task: str
    queue: str
    tenant_id: int | None
    priority: int
    max_attempts: int
    delay_seconds: float
    run_at: datetime | None
    unique_key: str | None
    trace_context: str | None = None  # JSON of the enqueuing span's W3C trace context
    timeout_seconds: float | None = None


class AttemptResult(NamedTuple):
    """What one attempt ended with, as the runner reports it (a named tuple, as
    :class:`ClaimedJob` is: one is made for every attempt)."""

    job: ClaimedJob
    # 'succeeded'; 'failed' or 'timed_out' (retried if budget is left); 'dead' (permanent)
    outcome: str
    error: str | None
    traceback: str | None
    retry_delay: float
    duration: float  # seconds the task ran
    trace_id: str | None = None  # of the attempt's span, when tracing is on

    @property
    def job_id(self) -> int:
        return self.job.id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def wait(self) -> float:
        """Seconds between becoming visible and being claimed."""
        return max((self.job.started_at - self.job.available_at).total_seconds(), 0.0)


class JobStore:
    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self._queries = all_queries()
        # The listener's claim of an idle queue's one job runs on a cursor kept for it: a new
        # cursor for each claim (its transformer and loaders made again) cost a pickup 0.07 ms
        # at the median, after the runner's 10 ms of idle (docs/benchmarks.md, "2026-12-05,
        # afternoon"). It holds one row at most between claims. A store kept by its Link
        # keeps it from one claim to the next.
        self._sole_cursor: psycopg.Cursor[Any] | None = None

    def _execute(self, name: str, params: dict[str, Any]) -> psycopg.Cursor[Any]:
        # A generic plan knows no batch's size: before the batch writes looked their rows up
        # one by one, one guessed ten rows and joined the batch in a nested loop, 300 ms for
        # 1,000 results. Those not shown to plan well without their values are planned afresh.
        prepare = False if name in PLANNED_PER_BATCH else None
        return self.connection.execute(self._queries[name].sql, params, prepare=prepare)

    # -- enqueue -------------------------------------------------------------------------------

    def insert_job(self, job: NewJob, payload: str) -> int:
        """Insert one job with its payload (JSON text); a live duplicate's id if its key is held."""
        for _ in range(3):
            row = self._execute("job_insert", _insert_params(job, payload)).fetchone()
            if row is not None:
                return int(row[0])
            existing = self._find_live(job.tenant_id, job.unique_key)
            if existing is not None:
                return existing
            # The holder of the key finished between our insert and our look-up: insert again.
        raise RuntimeError(f"could not insert or find the job with unique key {job.unique_key!r}")

    def insert_jobs(self, jobs: Sequence[NewJob], payloads: str) -> list[int]:
        """Insert jobs in one statement; ``payloads`` is a JSON array, one object per job."""
        params = batch_params(jobs, payloads)
        if params["common_unique_key"] is None and not params["unique_keys"]:
            return list(_one(self._execute("job_insert_many", params))[0])
        row = _one(self._execute("job_insert_many_unique", params))
        ids, inserted = list(row[0]), set(row[1])
        if len(inserted) < len(ids):
            documents = json.loads(payloads)
            for position, job_id in enumerate(ids):
                if job_id not in inserted:  # a live job holds its unique key: answer with its id
                    payload = json.dumps(documents[position])
                    ids[position] = self.insert_job(jobs[position], payload)
        return ids

    def _find_live(self, tenant_id: int | None, unique_key: str | None) -> int | None:
        params = {"tenant_id": tenant_id, "unique_key": unique_key}
        row = self._execute("job_find_live_by_unique_key", params).fetchone()
        return None if row is None else int(row[0])

    # -- the runner's loop ---------------------------------------------------------------------

    def claim(
        self, queue: str, limit: int, worker: str, lease_seconds: float, fair: bool = False
    ) -> list[ClaimedJob]:
        """Claim up to ``limit`` visible jobs of ``queue``; ``fair`` shares the claim between the
        tenants with waiting jobs (job_claim_fair) instead of taking them in queue order."""
        return self.claim_measured(queue, limit, worker, lease_seconds, fair)[0]

    def claim_measured(
        self,
        queue: str,
        limit: int,
        worker: str,
        lease_seconds: float,
        fair: bool = False,
        sole_first: bool = False,
    ) -> tuple[list[ClaimedJob], float]:
        """:meth:`claim`, and the mean size in bytes of the claimed jobs' payloads as the server
        sent them (their JSON text), from at most ``PAYLOAD_SAMPLE`` of them spread over the
        claim (0 when it claimed nothing). With ``sole_first`` (the listener's claims), a queue
        that holds at most one available job is claimed by ``job_claim_sole``, which takes what
        the full claim would; any other by the full claim, after it."""
        params = {"queue": queue, "limit": limit, "worker": worker, "lease_seconds": lease_seconds}
        if sole_first and limit > 0:
            cursor = self._sole_cursor
            if cursor is None:
                cursor = self._sole_cursor = self.connection.cursor()
            cursor.execute(self._queries["job_claim_sole"].sql, params)
            row = _one(cursor)
            if not row[-1]:  # not a case for the full claim: this is the claim
                if row[0] is None:
                    return [], 0.0
                result = cursor.pgresult
                size = len(result.get_value(0, PAYLOAD_COLUMN) or b"") if result else 0
                return [ClaimedJob(*row[:-1])], float(size)
        statement = "job_claim_fair" if fair else "job_claim"
        cursor = self._execute(statement, params)
        jobs = [ClaimedJob(*row) for row in cursor]
        sizes = []
        if (result := cursor.pgresult) is not None:
            rows = result.ntuples
            for row in range(0, rows, max(1, -(-rows // PAYLOAD_SAMPLE))):
                sizes.append(len(result.get_value(row, PAYLOAD_COLUMN) or b""))
        # UPDATE ... RETURNING keeps no order: run them in the order they were picked.
        jobs.sort(key=lambda job: (job.priority, job.available_at, job.id))
        return jobs, sum(sizes) / len(sizes) if sizes else 0.0

    def finish(
        self, results: Sequence[AttemptResult], worker: str
    ) -> dict[tuple[int, int], Written]:
        """Write attempt results and count them in the per-minute stats, in one statement;
        returns what became of each, by (job id, attempt) (those not written asked after in a
        second statement, which only they pay for)."""
        results = sorted(results, key=lambda r: r.job_id)  # the statement locks in this order
        params = {
            "ids": [r.job_id for r in results],
            "attempts": [r.attempt for r in results],
            "outcomes": [r.outcome for r in results],
            "errors": [r.error for r in results],
            "tracebacks": [r.traceback for r in results],
            # binary arrays (their dumping costs half the text's); one type per array
            "retry_delays": [float(r.retry_delay) for r in results],
            "durations": [float(r.duration) for r in results],
            "trace_ids": [r.trace_id for r in results],
            "worker": worker,
        }
        written = {
            (int(job_id), attempt): Written(state, "written")
            for job_id, attempt, state in self._execute("job_finish", params)
        }
        others = [(r.job_id, r.attempt) for r in results if (r.job_id, r.attempt) not in written]
        if others:
            ids, attempts = zip(*others, strict=True)
            fates = self._execute(
                "job_result_fates", {"ids": list(ids), "attempts": list(attempts), "worker": worker}
            )
            written.update(
                ((int(job_id), attempt), Written(state, how))
                for job_id, attempt, state, how in fates
            )
        return written

    def release(self, jobs: Sequence[tuple[int, int, bool, float]], worker: str) -> list[int]:
        """Give back (id, attempt, started, seconds run) jobs at shutdown; returns the ids of the
        jobs given back that had started."""
        jobs = sorted(jobs)  # the statement locks in this order
        params = {
            "ids": [job[0] for job in jobs],
            "attempts": [job[1] for job in jobs],
            "started": [job[2] for job in jobs],
            "durations": [job[3] for job in jobs],
            "worker": worker,
        }
        rows = self._execute("job_release", params).fetchall()
        return [int(row[0]) for row in rows if row[1]]

    def extend_leases(
        self, held: Sequence[tuple[int, int]], worker: str, lease_seconds: float
    ) -> dict[tuple[int, int], str]:
        """Extend the leases of (id, attempt) pairs; returns each pair's fate: 'extended',
        'cancel_requested' (extended, and asked to stop), 'done' (its result was written, or it
        was given back) or 'lost' (taken over)."""
        params = {
            "ids": [job_id for job_id, _ in held],
            "attempts": [attempt for _, attempt in held],
            "worker": worker,
            "lease_seconds": lease_seconds,
        }
        return {
            (int(job_id), attempt): fate
            for job_id, attempt, fate in self._execute("job_extend_leases", params)
        }

    # -- maintenance ---------------------------------------------------------------------------

    def rescue_expired(self, limit: int = 1000) -> list[RescuedJob]:
        """Sweep expired leases (and count them in the stats); returns the rescued jobs."""
        rows = self._execute("job_rescue_expired", {"limit": limit})
        return [RescuedJob(int(row[0]), row[1], row[2], row[3]) for row in rows]

    def elect(self, name: str, holder: str, ttl_seconds: float) -> Term | None:
        """Win or keep the leadership of duty ``name``; None while another holder's term lasts."""
        params = {"name": name, "holder": holder, "ttl_seconds": ttl_seconds}
        row = self._execute("leader_elect", params).fetchone()
        return None if row is None else Term(name, holder, int(row[0]))

    def renew(self, term: Term, ttl_seconds: float) -> bool:
        """Extend ``term``'s lease; False when the term is over and its holder must step down."""
        params = {**term.params(), "ttl_seconds": ttl_seconds}
        return self._execute("leader_renew", params).fetchone() is not None

    def resign(self, term: Term) -> bool:
        """Give up ``term`` now; False when it was already over."""
        return self._execute("leader_resign", term.params()).rowcount == 1

    def leader(self, name: str) -> dict[str, Any] | None:
        """Who leads duty ``name``, in which term, until when; None if nobody ever did."""
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries["leader_current"].sql, {"name": name})
            return cursor.fetchone()

    def prune(
        self, term: Term, keep_succeeded_seconds: float, keep_dead_seconds: float, limit: int
    ) -> int:
        """Delete a batch of the old finished jobs that no partition drop takes (dead ones, and
        stragglers outside the history partitions), fenced by the leader's ``term``; returns the
        jobs deleted."""
        params = {
            **term.params(),
            "keep_succeeded_seconds": keep_succeeded_seconds,
            "keep_dead_seconds": keep_dead_seconds,
            "limit": limit,
        }
        row = self._execute("job_prune", params).fetchone()
        return int(row[0]) if row else 0

    def history_partitions(
        self, term: Term, period_seconds: float, keep_seconds: float, ahead_seconds: float
    ) -> list[tuple[str, str]]:
        """Create the history partitions ahead and drop the expired ones whole, fenced by the
        leader's ``term`` (held for the transaction); returns (action, partition) of each. On
        an autocommit connection: the DDL commits here."""
        params = {
            "period_seconds": period_seconds,
            "keep_seconds": keep_seconds,
            "ahead_seconds": ahead_seconds,
        }
        with self.connection.transaction():
            if self._execute("job_history_fence", term.params()).fetchone() is None:
                return []
            rows = self.connection.execute(self._queries["job_history"].sql, params,
                                           prepare=False)  # fmt: skip
            return [(str(action), str(partition)) for action, partition in rows]

    def sample_depth(self, term: Term) -> int:
        """Write this minute's depth sample of every queue and tenant, fenced by the leader's
        ``term``; returns the rows written."""
        return self._execute("queue_depth_sample", term.params()).rowcount

    def queue_depth(self) -> list[tuple[str, str, float]]:
        """Every known queue's depth now, as (queue, measure, value) with measure available,
        scheduled, running, dead or oldest_age (seconds)."""
        measures = ("available", "scheduled", "running", "dead", "oldest_age")
        return [
            (row[0], measure, float(value))
            for row in self._execute("queue_depth_now", {})
            for measure, value in zip(measures, row[1:], strict=True)
        ]

    def enqueue_due_schedules(self, term: Term) -> list[tuple[str, int]]:
        """Enqueue the scheduled jobs whose time has come, fenced by the leader's ``term``;
        returns (schedule, job id) for each."""
        return [(name, job_id) for name, job_id in self._execute("schedule_enqueue_due",
                                                                 term.params())]  # fmt: skip

    def autovacuum_gaps(self) -> list[tuple[str, str]]:
        """The engine's churning tables autovacuum will not vacuum, as (table, why)."""
        rows = self.connection.execute(self._queries["autovacuum_gaps"].sql, prepare=False)
        return [(str(table), str(reason)) for table, reason in rows]

    def live_dead_rows(self) -> int:
        """Dead row versions waiting in jobs_live, by the server's statistics."""
        return int(_one(self.connection.execute(self._queries["live_table_dead_rows"].sql))[0])

    def vacuum_live_table(self) -> None:
        """VACUUM jobs_live (on an autocommit connection), unless autovacuum is at it; ANALYZE
        it too while it has no statistics (a new database, before autovacuum first came by)."""
        analyzed = _one(self._execute("live_table_has_statistics", {}))[0]
        vacuum = "live_table_vacuum" if analyzed else "live_table_vacuum_analyze"
        self.connection.execute(self._queries[vacuum].sql, prepare=False)

    def analyze_live_table_if_outgrown(self, rows: int) -> bool:
        """ANALYZE jobs_live (on an autocommit connection) when it holds at least ``rows`` and
        more than twice the rows its statistics know; True when it did."""
        outgrown = _one(self._execute("live_table_outgrown", {"rows": rows}))[0]
        if outgrown:
            self.connection.execute(self._queries["live_table_analyze"].sql, prepare=False)
        return bool(outgrown)

    def vacuum_hot_tables(self) -> None:
        """VACUUM (and ANALYZE) the churning tables; needs an autocommit connection."""
        self.connection.execute(self._queries["hot_tables_vacuum"].sql, prepare=False)

    def prune_stats(self, term: Term, keep_seconds: float) -> None:
        """Delete stats, depth samples and stopped worker rows past their retention age, fenced
        by the leader's ``term``."""
        self._execute("stats_prune", {**term.params(), "keep_seconds": keep_seconds})

    # -- the worker registry -------------------------------------------------------------------

    def register_worker(self, worker: "WorkerIdentity") -> int:
        params = {
            "name": worker.name,
            "hostname": worker.hostname,
            "pid": worker.pid,
            "parent_id": worker.parent_id,
            "queue": worker.queue,
            "threads": worker.threads,
        }
        return int(_one(self._execute("worker_register", params))[0])

    def worker_heartbeat(
        self, worker_id: int, state: str, in_flight: int, abandoned_threads: int = 0
    ) -> bool:
        """Record a heartbeat (state: running or draining); returns True when someone asked this
        worker to drain."""
        params = {
            "id": worker_id,
            "state": state,
            "in_flight": in_flight,
            "abandoned_threads": abandoned_threads,
        }
        row = self._execute("worker_heartbeat", params)
        found = row.fetchone()
        return bool(found and found[0])

    def set_worker_state(
        self,
        worker_id: int,
        state: str,
        in_flight: int | None = None,
        abandoned_threads: int | None = None,
    ) -> None:
        params = {
            "id": worker_id,
            "state": state,
            "in_flight": in_flight,
            "abandoned_threads": abandoned_threads,
        }
        self._execute("worker_set_state", params)

    def request_drain(self, worker_id: int, requested_by: str) -> list[int]:
        """Ask a worker (a supervisor: with its children) to drain; returns the ids asked."""
        params = {"id": worker_id, "requested_by": requested_by}
        return [int(row[0]) for row in self._execute("worker_request_drain", params)]

    def mark_lost_workers(self, lost_after_seconds: float) -> list[str]:
        """Mark workers silent for longer than ``lost_after_seconds`` lost; returns their names."""
        params = {"lost_after_seconds": lost_after_seconds}
        return [row[1] for row in self._execute("worker_mark_lost", params)]

    # -- operations ----------------------------------------------------------------------------

    def requeue(self, job_id: int, attempt_budget: int) -> bool:
        """Requeue a dead or cancelled job; False if it is in another state. Refused while a live
        job holds the same unique key (that job already does this one's work)."""
        params = {"id": job_id, "attempt_budget": attempt_budget}
        try:
            row = self._on_moving_rows(lambda: self._execute("job_requeue", params).fetchone())
        except psycopg.errors.UniqueViolation:
            raise OperationRefused(
                f"job {job_id} cannot be requeued: a waiting or running job holds its unique key"
            ) from None
        return row is not None

    def cancel(self, job_id: int) -> str | None:
        """Cancel a waiting job at once ('cancelled'), or ask a running one to stop ('running':
        its worker learns of it at its next heartbeat, the task through
        ``ctx.cancel_requested``); None when the job is neither (nothing changes)."""
        row = self._on_moving_rows(lambda: self._execute("job_cancel", {"id": job_id}).fetchone())
        return None if row is None else str(row[1])

    def run_now(self, job_id: int) -> bool:
        row = self._on_moving_rows(lambda: self._execute("job_run_now", {"id": job_id}).fetchone())
        return row is not None

    def requeue_many(self, budgets: dict[int, int]) -> list[tuple[int, int, str]]:
        """Requeue dead or cancelled jobs ({id: attempt budget}); returns (id, tenant id, queue)
        of those requeued. Jobs in other states, and jobs whose unique key a live job (or a newer
        job of the same batch) holds, are left as they are."""
        params = {"ids": list(budgets), "budgets": list(budgets.values())}
        rows = self._on_moving_rows(lambda: self._execute("job_requeue_many", params).fetchall())
        return [(int(row[0]), int(row[1]), row[2]) for row in rows]

    def discard(self, job_ids: Sequence[int]) -> list[tuple[int, int, str]]:
        """Discard dead jobs (they become cancelled); returns (id, tenant id, queue) of each."""
        params = {"ids": list(job_ids)}
        rows = self._on_moving_rows(lambda: self._execute("job_discard", params).fetchall())
        return [(int(row[0]), int(row[1]), row[2]) for row in rows]

    def _on_moving_rows(self, operation: Callable[[], _T]) -> _T:
        """Run an operator's write on jobs that another write may move meanwhile. A job's state
        is its partition: a statement that waited for a row while a finish, cancel or requeue
        moved it to another partition fails with 40001 (PostgreSQL does not follow a row across
        partitions). It runs again from a savepoint (its own transaction on an autocommit
        connection) and finds the job where it went; the caller's transaction goes on."""
        for _ in range(_MOVED_ROW_RETRIES):
            try:
                with self.connection.transaction():
                    return operation()
            except psycopg.errors.SerializationFailure:
                continue
        with self.connection.transaction():
            return operation()

    def get(self, job_id: int) -> dict[str, Any] | None:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries["job_get"].sql, {"id": job_id})
            return cursor.fetchone()

    def attempts(self, job_id: int) -> list[dict[str, Any]]:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            sql = self._queries["job_attempt_list"].sql
            cursor.execute(sql, {"id": job_id})
            return cursor.fetchall()

    def configure_rate_limit(self, queue: str, limit: int | None, period_seconds: float) -> None:
        """The limit pauta.toml gives ``queue`` (None: none), unless the console set one."""
        params = {"queue": queue, "rate_limit": limit, "period_seconds": period_seconds}
        self._execute("queue_rate_limit_configure", params)

    def rate_limits(self, queues: Sequence[str]) -> dict[str, tuple[int, float]]:
        """The rate limits of ``queues`` that have one: (starts, period in seconds)."""
        rows = self._execute("queue_rate_limits", {"queues": list(queues)})
        return {name: (int(limit), float(period)) for name, limit, period in rows}

    def set_rate_limit(
        self, queue: str, limit: int | None, period_seconds: float, set_by: str | None
    ) -> None:
        """Set (or clear, with None) a queue's limit of starts per period, at once."""
        params = {
            "queue": queue,
            "rate_limit": limit,
            "period_seconds": period_seconds,
            "set_by": set_by,
        }
        self._execute("queue_rate_limit_set", params)

    def pause_queue(self, queue: str, paused_by: str) -> None:
        self._execute("queue_pause", {"queue": queue, "paused_by": paused_by})

    def resume_queue(self, queue: str) -> bool:
        return self._execute("queue_resume", {"queue": queue}).fetchone() is not None

    def queues(self) -> list[dict[str, Any]]:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries["queue_list"].sql)
            return cursor.fetchall()

    def state_counts(self) -> dict[str, dict[str, int]]:
        counts: dict[str, dict[str, int]] = {}
        for queue, state, jobs in self._execute("queue_state_counts", {}):
            counts.setdefault(queue, {})[state] = int(jobs)
        return counts


def batch_params(jobs: Sequence[NewJob], payloads: str) -> dict[str, Any]:
    """job_insert_many's parameters for ``jobs`` (``payloads``: their JSON array)."""
    # one enqueue span for the batch: its context is the first job's
    params: dict[str, Any] = {"payloads": payloads, "trace_context": jobs[0].trace_context}
    for column, values in (
        ("tenant_id", [job.tenant_id for job in jobs]),
        ("queue", [job.queue for job in jobs]),
        ("task", [job.task for job in jobs]),
        ("priority", [job.priority for job in jobs]),
        ("max_attempts", [job.max_attempts for job in jobs]),
        ("delay", [job.delay_seconds for job in jobs]),
        ("run_at", [job.run_at for job in jobs]),
        ("timeout", [job.timeout_seconds for job in jobs]),
        ("unique_key", [job.unique_key for job in jobs]),
    ):
        params[f"common_{column}"], params[_ARRAYS[column]] = _batch_column(values)
    return params


# job_insert_many's array parameter of each batch column
_ARRAYS = {
    "tenant_id": "tenant_ids",
    "queue": "queues",
    "task": "tasks",
    "priority": "priorities",
    "max_attempts": "max_attempts",
    "delay": "delays",
    "run_at": "run_ats",
    "timeout": "timeouts",
    "unique_key": "unique_keys",
}


def _batch_column(values: list[Any]) -> tuple[Any, list[Any]]:
    """A column of a batch as job_insert_many takes it: the value every row has and an empty
    array, or None and every row's value. Most batches have one queue, task, priority and tenant:
    a value sent once is not dumped a thousand times by psycopg, nor unnested by the server (a
    1,000-job statement about 30% cheaper, docs/benchmarks.md)."""
    first = values[0]
    if values.count(first) == len(values):
        return first, []
    return None, values


def _one(cursor: psycopg.Cursor[Any]) -> Any:
    row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the statement returned no row")
    return row


def _insert_params(job: NewJob, payload: str) -> dict[str, Any]:
    return {
        "tenant_id": job.tenant_id,
        "queue": job.queue,
        "task": job.task,
        "payload": payload,
        "priority": job.priority,
        "max_attempts": job.max_attempts,
        "delay": job.delay_seconds,
        "run_at": job.run_at,
        "unique_key": job.unique_key,
        "trace_context": job.trace_context,
        "timeout": job.timeout_seconds,
    }
