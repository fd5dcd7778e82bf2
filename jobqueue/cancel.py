"""Cancel a job from application code, in the caller's transaction (as ``enqueue`` is)."""

from typing import Any

from jobqueue.enqueue import psycopg_connection
from jobqueue.store import JobStore


def cancel(connection: Any, job_id: int) -> str | None:
    """Cancel job ``job_id``: a waiting, scheduled or backing-off job at once (returns
    ``'cancelled'``); a running one is asked to stop (returns ``'running'``): its worker learns
    of it at its next heartbeat, a task that checks ``ctx.cancel_requested`` ends ``cancelled``,
    one that does not ends at its timeout, and the job is not retried either way. Returns None,
    changing nothing, for a job that is finished or does not exist.

    ``connection``: a psycopg connection or a SQLAlchemy Session/Connection; the change takes
    effect when the caller commits.
    """
    return JobStore(psycopg_connection(connection)).cancel(job_id)
