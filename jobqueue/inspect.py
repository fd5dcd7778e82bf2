"""JobInspector: the console's read-only questions about the engine's tables.

Each method runs one named statement of the "Console: inspection" section of queries.sql and
returns plain rows (dicts). ``tenant_id=None`` means every tenant. The statements are run
unprepared (``prepare=False``): each execution is planned with its parameters' values, so a filter
left out (NULL) folds away and a state asked for lets the planner pick that state's partial
index, which a generic plan of a prepared statement could not.

Like ``JobStore``, it never commits: it reads in whatever transaction its connection is in.
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from jobqueue.queries import all_queries

Row = dict[str, Any]

# A worker process counts as serving its queues while it heartbeats within this many seconds
# (the worker's default lost_after_seconds: the leader marks it lost after as long).
LIVE_WITHIN_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class JobFilter:
    """What the job list is narrowed to; every field left None matches everything."""

    tenant_id: int | None = None
    state: str | None = None  # a JobState value, or "scheduled" (available, not visible yet)
    queue: str | None = None
    task: str | None = None
    error: str | None = None  # text anywhere in last_error, case-insensitive
    payload_key: str | None = None
    payload_value: str | None = None  # compared with the key's value as text
    min_id: int | None = None  # only jobs from this id up (a search bounded to recent jobs)

    def params(self) -> dict[str, Any]:
        state, visible = self.state, None
        if state == "scheduled":
            state, visible = "available", False
        elif state == "available":
            visible = True
        return {
            "tenant_id": self.tenant_id,
            "state": state,
            "visible": visible,
            "queue": self.queue,
            "task": self.task,
            "error_pattern": None if self.error is None else f"%{_escape_like(self.error)}%",
            "payload_key": self.payload_key,
            "payload_value": self.payload_value if self.payload_key is not None else None,
            "min_id": self.min_id,
        }


class JobInspector:
    def __init__(
        self, connection: psycopg.Connection[Any], live_within_seconds: float = LIVE_WITHIN_SECONDS
    ) -> None:
        self.connection = connection
        self.live_within_seconds = live_within_seconds
        self._queries = all_queries()

    def _rows(self, name: str, params: dict[str, Any]) -> list[Row]:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries[name].sql, params, prepare=False)
            return cursor.fetchall()

    def _one(self, name: str, params: dict[str, Any]) -> Row | None:
        rows = self._rows(name, params)
        return rows[0] if rows else None

    # -- figures -------------------------------------------------------------------------------

    def queue_live(self, tenant_id: int | None, queue: str | None = None) -> list[Row]:
        """Per queue: paused, available, scheduled, running, dead, oldest_waiting_seconds,
        live_workers."""
        params = {
            "tenant_id": tenant_id,
            "queue": queue,
            "live_within_seconds": self.live_within_seconds,
        }
        return self._rows("console_queue_live", params)

    def queue_outcomes(self, tenant_id: int | None, queue: str | None = None) -> list[Row]:
        """Per queue: outcomes over the last 1, 5 and 60 minutes; run and wait times over 5."""
        return self._rows("console_queue_outcomes", {"tenant_id": tenant_id, "queue": queue})

    def stats_series(
        self, queue: str | None, tenant_id: int | None, window_seconds: int, bucket_seconds: int
    ) -> list[Row]:
        return self._series(
            "console_stats_series", queue, tenant_id, window_seconds, bucket_seconds
        )

    def depth_series(
        self, queue: str | None, tenant_id: int | None, window_seconds: int, bucket_seconds: int
    ) -> list[Row]:
        return self._series(
            "console_depth_series", queue, tenant_id, window_seconds, bucket_seconds
        )

    def _series(
        self,
        name: str,
        queue: str | None,
        tenant_id: int | None,
        window_seconds: int,
        bucket_seconds: int,
    ) -> list[Row]:
        params = {
            "queue": queue,
            "tenant_id": tenant_id,
            "window_seconds": window_seconds,
            "bucket_seconds": bucket_seconds,
        }
        return self._rows(name, params)

    # -- jobs ----------------------------------------------------------------------------------

    def jobs(self, where: JobFilter, before_id: int | None, limit: int) -> list[Row]:
        """Up to ``limit`` jobs matching ``where`` with ids below ``before_id``, newest first."""
        params = {**where.params(), "before_id": before_id, "limit": limit}
        return self._rows("console_job_list", params)

    def search_facts(self) -> Row:
        """``error_indexed`` (the error filter's trigram index exists) and ``newest_id``."""
        return self._rows("console_search_facts", {})[0]

    def job(self, job_id: int, tenant_id: int | None, payload_chars: int) -> Row | None:
        """One job and what explains its state; None if it does not exist for this tenant."""
        params = {
            "id": job_id,
            "tenant_id": tenant_id,
            "payload_chars": payload_chars,
            "live_within_seconds": self.live_within_seconds,
        }
        return self._one("console_job_detail", params)

    def payload(self, job_id: int, tenant_id: int | None) -> str | None:
        row = self._one("console_job_payload", {"id": job_id, "tenant_id": tenant_id})
        return None if row is None else str(row["jsonb_pretty"])

    def attempts(self, job_id: int) -> list[Row]:
        """The job's attempts, oldest first (ask ``job`` first: this does not check the tenant)."""
        return self._rows("job_attempt_list", {"id": job_id})

    def scheduled(
        self,
        tenant_id: int | None,
        queue: str | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[Row]:
        """Jobs not visible yet, soonest first, after the (available_at, id) ``after``."""
        params = {
            "tenant_id": tenant_id,
            "queue": queue,
            "after_at": after[0] if after else None,
            "after_id": after[1] if after else None,
            "limit": limit,
        }
        return self._rows("console_scheduled_list", params)

    # -- failures ------------------------------------------------------------------------------

    def failure_groups(self, tenant_id: int | None, queue: str | None, limit: int) -> list[Row]:
        """Dead jobs grouped by fingerprint, largest group first."""
        params = {"tenant_id": tenant_id, "queue": queue, "limit": limit}
        return self._rows("console_failure_groups", params)

    def failure_group(self, fingerprint: str, tenant_id: int | None) -> Row | None:
        """One group's summary; None when it has no dead job (left) for this tenant."""
        params = {"fingerprint": fingerprint, "tenant_id": tenant_id}
        return self._one("console_failure_group", params)

    def failure_jobs(
        self,
        fingerprint: str,
        tenant_id: int | None,
        *,
        max_id: int | None = None,
        ids: list[int] | None = None,
        before_id: int | None = None,
        limit: int,
    ) -> list[Row]:
        """Dead jobs of one fingerprint, newest first: up to ``max_id``, among ``ids``."""
        params = {
            "fingerprint": fingerprint,
            "tenant_id": tenant_id,
            "max_id": max_id,
            "ids": ids,
            "before_id": before_id,
            "limit": limit,
        }
        return self._rows("console_failure_group_jobs", params)

    # -- workers -------------------------------------------------------------------------------

    def queue_rate(self, queue: str) -> Row | None:
        """A queue's rate limit (None: none), and its attempts per second in the last minute."""
        return self._one("console_queue_rate", {"queue": queue})

    def queue_tenants(self, queue: str, tenant_id: int | None, limit: int = 50) -> list[Row]:
        """A queue's waiting and running jobs per tenant, the tenants with most waiting first."""
        return self._rows(
            "console_queue_tenants", {"queue": queue, "tenant_id": tenant_id, "limit": limit}
        )

    def workers(self, limit: int = 500) -> list[Row]:
        """Live workers and those heard from in the last day, supervisors before children."""
        return self._rows("console_worker_list", {"limit": limit})


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
