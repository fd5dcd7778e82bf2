"""Why a job is in its state, in one sentence, and what an operator can do about it.

Works on a row of ``JobInspector.job`` (the job with its queue's pause, the live workers of its
queue and the database's ``now``), so the explanation uses the database's clock, not the web
server's. For a reader who is not an ``operator`` (a platform admin) it names no worker process
and no admin who paused the queue (see console.redaction).
"""

from dataclasses import dataclass

from flask_babel import gettext as _

from console.formatting import rate_text, relative, utc
from jobqueue.inspect import Row
from jobqueue.states import JobState


@dataclass(frozen=True, slots=True)
class Explanation:
    label: str  # waiting, scheduled, backing off, running, succeeded, dead, cancelled
    reason: str
    actions: tuple[str, ...]  # of "run_now", "cancel", "requeue", "discard"


def explain(job: Row, operator: bool = True) -> Explanation:
    state = job["state"]
    if state == JobState.AVAILABLE:
        return _waiting(job, operator)
    if state == JobState.RUNNING:
        if job.get("cancel_requested_at") is not None:
            return Explanation("running", _running(job, operator) + _cancelling(job), ())
        return Explanation("running", _running(job, operator), ("cancel",))
    if state == JobState.SUCCEEDED:
        reason = f"succeeded at {utc(job['finished_at'])} on attempt {job['attempt']}"
        return Explanation("succeeded", reason, ())
    if state == JobState.DEAD:
        return Explanation("dead", _dead(job), ("requeue", "discard"))
    if job.get("cancel_requested_at") is not None:
        reason = _("cancelled at %(at)s: asked to stop while it ran", at=utc(job["finished_at"]))
        return Explanation("cancelled", reason, ("requeue",))
    reason = f"cancelled at {utc(job['finished_at'])} by an operator"
    if job["last_error"]:
        reason += f", after attempt {job['attempt']} of {job['max_attempts']} had failed"
    return Explanation("cancelled", reason, ("requeue",))


def _waiting(job: Row, operator: bool) -> Explanation:
    now, at = job["now"], job["available_at"]
    if at > now:
        when = f"{utc(at)} ({relative(at, now)})"
        if job["attempt"] == 0:
            label, reason = "scheduled", f"scheduled for {when}"
        else:
            label = "backing off"
            reason = (
                f"backing off after attempt {job['attempt']} of {job['max_attempts']}; "
                f"next try at {when}"
            )
        return Explanation(label, reason + _blocked_note(job), ("run_now", "cancel"))
    if job["queue_paused"]:
        by = f" by {job['queue_paused_by']}" if job["queue_paused_by"] and operator else ""
        reason = f"waiting: queue paused{by} since {utc(job['queue_paused_at'])}"
    elif job["live_workers"] == 0:
        reason = "waiting: no live worker serves this queue"
    elif job.get("queue_rate_limit") is not None:
        rate = rate_text(job["queue_rate_limit"], job["queue_rate_period"])
        reason = _(
            "waiting since %(since)s (%(ago)s): rate limited: %(rate)s (the queue %(queue)s "
            "starts at most that many jobs)",
            since=utc(at),
            ago=relative(at, now),
            rate=rate,
            queue=job["queue"],
        )
    else:
        reason = f"waiting for a free worker since {utc(at)} ({relative(at, now)})"
    return Explanation("waiting", reason, ("cancel",))


def _blocked_note(job: Row) -> str:
    """What will hold a scheduled job up even once its time has come."""
    if job["queue_paused"]:
        return "; its queue is paused, so it will wait beyond that"
    if job["live_workers"] == 0:
        return "; no live worker serves its queue now"
    return ""


def _running(job: Row, operator: bool) -> str:
    now, lease = job["now"], job["lease_expires_at"]
    if lease < now:
        holder = job["locked_by"] if operator else "a worker"
        return (
            f"claimed by {holder}, whose lease expired {relative(lease, now)}: "
            "the sweeper will put it back"
        )
    where = f"running on {job['locked_by']}" if operator else "running"
    return (
        f"{where}: attempt {job['attempt']} of {job['max_attempts']}, "
        f"claimed {relative(job['started_at'], now)}, lease until {utc(lease, with_date=False)}"
    )


def _cancelling(job: Row) -> str:
    asked = job["cancel_requested_at"]
    return _(
        "; cancel requested %(ago)s: it stops when its task next checks, or at its timeout, "
        "and is not retried",
        ago=relative(asked, job["now"]),
    )


def _dead(job: Row) -> str:
    attempts = f"attempt {job['attempt']} of {job['max_attempts']}"
    if (job["last_error"] or "").startswith("LeaseExpired"):
        return f"dead: its worker stopped renewing the lease on its last attempt ({attempts})"
    if job["attempt"] < job["max_attempts"]:
        return f"dead: a permanent error on {attempts}, so no retry"
    return f"dead: {attempts} failed and no attempt is left"
