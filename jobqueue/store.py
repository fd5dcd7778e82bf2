"""JobStore: runs the named statements of queries.sql on one psycopg connection.

The store never commits: whoever owns the connection owns the transaction. The runner's own
connections are in autocommit mode, so each statement is its own transaction; an enqueue made
through a caller's connection joins the caller's transaction.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobqueue.errors import OperationRefused
from jobqueue.queries import all_queries

LEADER_LOCK_KEY = 0x7061_7574_6100  # "pauta" in ASCII: the maintenance leader's advisory lock


@dataclass(frozen=True, slots=True)
class ClaimedJob:
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


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one attempt ended with, as the runner reports it."""

    job_id: int
    attempt: int
    outcome: str  # 'succeeded', 'failed' (retry if budget left) or 'dead' (permanent)
    error: str | None
    traceback: str | None
    retry_delay: float
    duration: float


class JobStore:
    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self._queries = all_queries()

    def _execute(self, name: str, params: dict[str, Any]) -> psycopg.Cursor[Any]:
        return self.connection.execute(self._queries[name].sql, params)

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
        params = {
            "tenant_ids": [job.tenant_id for job in jobs],
            "queues": [job.queue for job in jobs],
            "tasks": [job.task for job in jobs],
            "payloads": payloads,
            "priorities": [job.priority for job in jobs],
            "max_attempts": [job.max_attempts for job in jobs],
            "delays": [job.delay_seconds for job in jobs],
            "run_ats": [job.run_at for job in jobs],
        }
        if all(job.unique_key is None for job in jobs):
            return list(_one(self._execute("job_insert_many", params))[0])
        params["unique_keys"] = [job.unique_key for job in jobs]
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

    def claim(self, queue: str, limit: int, worker: str, lease_seconds: float) -> list[ClaimedJob]:
        params = {"queue": queue, "limit": limit, "worker": worker, "lease_seconds": lease_seconds}
        return [ClaimedJob(*row) for row in self._execute("job_claim", params)]

    def finish(self, results: Sequence[AttemptResult], worker: str) -> dict[int, str]:
        """Write attempt results; returns {job id: new state} for the results that still held
        their lease. A missing id means the job was taken over and this result was discarded."""
        params = {
            "ids": [r.job_id for r in results],
            "attempts": [r.attempt for r in results],
            "outcomes": [r.outcome for r in results],
            "errors": [r.error for r in results],
            "tracebacks": [r.traceback for r in results],
            "retry_delays": [r.retry_delay for r in results],
            "durations": [r.duration for r in results],
            "worker": worker,
        }
        return {int(job_id): state for job_id, state in self._execute("job_finish", params)}

    def release(self, jobs: Sequence[tuple[int, int, bool, float]], worker: str) -> list[int]:
        """Give back (id, attempt, started, seconds run) jobs at shutdown; returns released ids."""
        params = {
            "ids": [job[0] for job in jobs],
            "attempts": [job[1] for job in jobs],
            "started": [job[2] for job in jobs],
            "durations": [job[3] for job in jobs],
            "worker": worker,
        }
        return [int(row[0]) for row in self._execute("job_release", params)]

    def extend_leases(
        self, held: Sequence[tuple[int, int]], worker: str, lease_seconds: float
    ) -> set[tuple[int, int]]:
        """Extend the leases of (id, attempt) pairs; returns the pairs this worker still owns."""
        params = {
            "ids": [job_id for job_id, _ in held],
            "attempts": [attempt for _, attempt in held],
            "worker": worker,
            "lease_seconds": lease_seconds,
        }
        return {
            (int(job_id), attempt) for job_id, attempt in self._execute("job_extend_leases", params)
        }

    # -- maintenance ---------------------------------------------------------------------------

    def rescue_expired(self, limit: int = 1000) -> dict[int, str]:
        """Sweep expired leases; returns {job id: new state} of the rescued jobs."""
        return {
            int(job_id): state
            for job_id, state, _ in self._execute("job_rescue_expired", {"limit": limit})
        }

    def prune(self, keep_succeeded_seconds: float, keep_dead_seconds: float, limit: int) -> int:
        params = {
            "keep_succeeded_seconds": keep_succeeded_seconds,
            "keep_dead_seconds": keep_dead_seconds,
            "limit": limit,
        }
        return self._execute("job_prune", params).rowcount

    def try_become_leader(self) -> bool:
        row = self._execute("leader_try_acquire", {"key": LEADER_LOCK_KEY}).fetchone()
        return bool(row and row[0])

    def step_down(self) -> None:
        self._execute("leader_release", {"key": LEADER_LOCK_KEY})

    # -- operations ----------------------------------------------------------------------------

    def requeue(self, job_id: int, attempt_budget: int) -> bool:
        """Requeue a dead or cancelled job; False if it is in another state. Refused while a live
        job holds the same unique key (that job already does this one's work)."""
        params = {"id": job_id, "attempt_budget": attempt_budget}
        try:
            with self.connection.transaction():
                return self._execute("job_requeue", params).fetchone() is not None
        except psycopg.errors.UniqueViolation:
            raise OperationRefused(
                f"job {job_id} cannot be requeued: a waiting or running job holds its unique key"
            ) from None

    def cancel(self, job_id: int) -> bool:
        return self._execute("job_cancel", {"id": job_id}).fetchone() is not None

    def run_now(self, job_id: int) -> bool:
        return self._execute("job_run_now", {"id": job_id}).fetchone() is not None

    def get(self, job_id: int) -> dict[str, Any] | None:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries["job_get"].sql, {"id": job_id})
            return cursor.fetchone()

    def attempts(self, job_id: int) -> list[dict[str, Any]]:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            sql = self._queries["job_attempt_list"].sql
            cursor.execute(sql, {"id": job_id})
            return cursor.fetchall()

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
    }
