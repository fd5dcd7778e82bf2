"""Operator actions. Each changes the engine's tables through ``JobStore`` and records itself in
``audit_log``, both on the caller's SQLAlchemy session: the caller commits once, so the action and
its record are one transaction. Each returns the sentence to show the operator, or raises
``ActionRefused`` (nothing changed, and nothing recorded) or ``NotFound``.
"""

from flask_babel import gettext as _
from flask_babel import ngettext
from sqlalchemy.orm import Session

from blueprints.words import job_state, worker_state
from console import failures
from console.audit import record, record_jobs
from console.errors import ActionRefused, NotFound
from console.formatting import rate_text
from jobqueue.backoff import DEFAULT_MAX_ATTEMPTS
from jobqueue.enqueue import psycopg_connection
from jobqueue.inspect import JobInspector, Row
from jobqueue.registry import registry
from jobqueue.states import JobState, WorkerState
from jobqueue.store import JobStore
from models import User
from models.audit import AuditAction, AuditTarget

LIVE_WORKER_STATES = (WorkerState.RUNNING, WorkerState.DRAINING)


def attempt_budget(task: str) -> int:
    """A requeued job's fresh budget: its task's retry policy, else the engine's default."""
    registered = registry.get(task)
    return registered.retry.max_attempts if registered else DEFAULT_MAX_ATTEMPTS


def _store(session: Session) -> JobStore:
    return JobStore(psycopg_connection(session))


def _job(store: JobStore, job_id: int) -> Row:
    job = store.get(job_id)
    if job is None:
        raise NotFound(f"there is no job {job_id}")
    return job


# -- one job -----------------------------------------------------------------------------------


def requeue_job(session: Session, actor: User, job_id: int) -> str:
    store = _store(session)
    job = _job(store, job_id)
    budget = attempt_budget(job["task"])
    changed = store.requeue_many({job_id: budget})
    if not changed:
        if job["state"] in (JobState.DEAD, JobState.CANCELLED):
            raise ActionRefused(
                _(
                    "Job %(id)s cannot be requeued: a waiting or running job holds its unique key.",
                    id=job_id,
                )
            )
        raise ActionRefused(
            _(
                "Job %(id)s is %(state)s; only dead or cancelled jobs can be requeued.",
                id=job_id,
                state=job_state(job["state"]),
            )
        )
    details = {"task": job["task"], "was": job["state"], "attempt_budget": budget}
    record_jobs(session, actor, AuditAction.JOB_REQUEUE, AuditTarget.JOB, job_id, changed, details)
    return ngettext(
        "Job %(id)s requeued with %(num)s more attempt.",
        "Job %(id)s requeued with %(num)s more attempts.",
        budget,
        id=job_id,
    )


def cancel_job(session: Session, actor: User, job_id: int) -> str:
    store = _store(session)
    job = _job(store, job_id)
    state = store.cancel(job_id)
    if state is None:
        raise ActionRefused(
            _(
                "Job %(id)s is %(state)s; only waiting, scheduled or running jobs can be "
                "cancelled.",
                id=job_id,
                state=job_state(job["state"]),
            )
        )
    details = {"task": job["task"], "was": job["state"]}
    record(session, actor, AuditAction.JOB_CANCEL, AuditTarget.JOB, job_id,
           tenant_id=job["tenant_id"], details=details)  # fmt: skip
    if state == JobState.RUNNING:
        return _(
            "Job %(job)s was asked to stop: its worker learns of it at its next heartbeat. "
            "It ends cancelled when its task checks, else at its timeout; it is not retried.",
            job=job_id,
        )
    return _("Job %(id)s cancelled; it will not run.", id=job_id)


def run_job_now(session: Session, actor: User, job_id: int) -> str:
    store = _store(session)
    job = _job(store, job_id)
    if not store.run_now(job_id):
        if job["state"] == JobState.AVAILABLE:
            raise ActionRefused(_("Job %(id)s is already waiting to run.", id=job_id))
        raise ActionRefused(
            _(
                "Job %(id)s is %(state)s; only scheduled or backing-off jobs can be run now.",
                id=job_id,
                state=job_state(job["state"]),
            )
        )
    details = {"task": job["task"], "was_due": job["available_at"].isoformat()}
    record(session, actor, AuditAction.JOB_RUN_NOW, AuditTarget.JOB, job_id,
           tenant_id=job["tenant_id"], details=details)  # fmt: skip
    return _("Job %(id)s will run as soon as a worker is free.", id=job_id)


def discard_job(session: Session, actor: User, job_id: int) -> str:
    store = _store(session)
    job = _job(store, job_id)
    changed = store.discard([job_id])
    if not changed:
        raise ActionRefused(
            _(
                "Job %(id)s is %(state)s; only dead jobs can be discarded.",
                id=job_id,
                state=job_state(job["state"]),
            )
        )
    details = {"task": job["task"], "last_error": job["last_error"]}
    record_jobs(session, actor, AuditAction.JOB_DISCARD, AuditTarget.JOB, job_id, changed, details)
    return _("Job %(id)s discarded: it is cancelled and leaves the failures list.", id=job_id)


# -- failure groups ----------------------------------------------------------------------------


def requeue_failures(
    session: Session, actor: User, fingerprint: str, max_id: int, ids: list[int] | None
) -> str:
    """Requeue a failure group's dead jobs up to ``max_id`` (or only ``ids`` among them)."""
    jobs = _failures(session, fingerprint, max_id, ids)
    changed = _store(session).requeue_many({job["id"]: attempt_budget(job["task"]) for job in jobs})
    if not changed:
        raise ActionRefused("None of these jobs could be requeued: live jobs hold their keys.")
    details = {"task": jobs[0]["task"], "selected": ids is not None}
    record_jobs(session, actor, AuditAction.JOB_REQUEUE, AuditTarget.FAILURE_GROUP, fingerprint,
                changed, details)  # fmt: skip
    left = len(jobs) - len(changed)
    requeued = ngettext(
        "Requeued %(num)s dead %(task)s job.",
        "Requeued %(num)s dead %(task)s jobs.",
        len(changed),
        task=jobs[0]["task"],
    )
    if left:
        requeued += " " + ngettext(
            "%(num)s job stayed dead: a waiting or running job holds its key.",
            "%(num)s jobs stayed dead: a waiting or running job holds its key.",
            left,
        )
    return requeued


def discard_failures(
    session: Session, actor: User, fingerprint: str, max_id: int, ids: list[int] | None
) -> str:
    """Discard a failure group's dead jobs up to ``max_id`` (or only ``ids`` among them)."""
    jobs = _failures(session, fingerprint, max_id, ids)
    changed = _store(session).discard([job["id"] for job in jobs])
    details = {"task": jobs[0]["task"], "selected": ids is not None}
    record_jobs(session, actor, AuditAction.JOB_DISCARD, AuditTarget.FAILURE_GROUP, fingerprint,
                changed, details)  # fmt: skip
    return ngettext(
        "Discarded %(num)s dead %(task)s job.",
        "Discarded %(num)s dead %(task)s jobs.",
        len(changed),
        task=jobs[0]["task"],
    )


def _failures(session: Session, fingerprint: str, max_id: int, ids: list[int] | None) -> list[Row]:
    if ids is not None and not ids:
        raise ActionRefused("No job was ticked: nothing was changed.")
    inspector = JobInspector(psycopg_connection(session))
    jobs = failures.selection(inspector, fingerprint, None, max_id, ids)
    if not jobs:
        raise ActionRefused("No dead job of this group is left: nothing was changed.")
    return jobs


# -- queues and workers ------------------------------------------------------------------------


PERIODS = {"second": 1.0, "minute": 60.0, "hour": 3600.0}


def set_rate_limit(
    session: Session, actor: User, queue: str, limit: int | None, period: str
) -> str:
    """Set (or clear, with None) a queue's rate limit: every worker's next claim obeys it."""
    _queue(session, queue)
    seconds = PERIODS[period]
    _store(session).set_rate_limit(queue, limit, seconds, actor.email if limit else None)
    details = {"limit": limit, "period_seconds": seconds}
    record(session, actor, AuditAction.QUEUE_RATE_LIMIT, AuditTarget.QUEUE, queue,
           details=details)  # fmt: skip
    if limit is None:
        return _(
            "Queue %(queue)s has no rate limit now (pauta.toml's applies from the next start).",
            queue=queue,
        )
    return _(
        "Queue %(queue)s now starts at most %(rate)s, from the next claim.",
        queue=queue,
        rate=rate_text(limit, seconds),
    )


def pause_queue(session: Session, actor: User, queue: str) -> str:
    store = _store(session)
    if _queue(session, queue)["paused"]:
        raise ActionRefused(_("Queue %(name)s is already paused.", name=queue))
    store.pause_queue(queue, paused_by=actor.email)
    record(session, actor, AuditAction.QUEUE_PAUSE, AuditTarget.QUEUE, queue)
    return _(
        "Queue %(name)s paused: workers claim none of its jobs until it is resumed.", name=queue
    )


def resume_queue(session: Session, actor: User, queue: str) -> str:
    store = _store(session)
    if not _queue(session, queue)["paused"]:
        raise ActionRefused(_("Queue %(name)s is not paused.", name=queue))
    store.resume_queue(queue)
    record(session, actor, AuditAction.QUEUE_RESUME, AuditTarget.QUEUE, queue)
    return _("Queue %(name)s resumed.", name=queue)


def _queue(session: Session, queue: str) -> Row:
    rows = JobInspector(psycopg_connection(session)).queue_live(None, queue)
    if not rows:
        raise NotFound(f"there is no queue {queue!r}")
    return rows[0]


def drain_worker(session: Session, actor: User, worker_id: int) -> str:
    """Ask a worker (a supervisor: with its children) to shut down gracefully."""
    worker = next((w for w in _workers(session) if w["id"] == worker_id), None)
    if worker is None:
        raise NotFound(f"there is no worker {worker_id}")
    asked = _store(session).request_drain(worker_id, requested_by=actor.email)
    if not asked:
        raise ActionRefused(
            _(
                "Worker %(name)s is %(state)s: nothing to shut down.",
                name=worker["name"],
                state=worker_state(worker["state"]),
            )
        )
    record(session, actor, AuditAction.WORKER_DRAIN, AuditTarget.WORKER, worker_id,
           affected=len(asked), details={"name": worker["name"], "worker_ids": asked})  # fmt: skip
    return ngettext(
        "Asked %(name)s to shut down gracefully (%(num)s process).",
        "Asked %(name)s to shut down gracefully (%(num)s processes).",
        len(asked),
        name=worker["name"],
    )


def drain_all_workers(session: Session, actor: User) -> str:
    """Ask every live worker not asked yet to shut down gracefully."""
    store = _store(session)
    asked: set[int] = set()
    for worker in _workers(session):
        fresh = worker["drain_requested_at"] is None and worker["id"] not in asked
        if worker["state"] in LIVE_WORKER_STATES and fresh:
            asked.update(store.request_drain(worker["id"], requested_by=actor.email))
    if not asked:
        raise ActionRefused("No running worker is left to ask: nothing to shut down.")
    record(session, actor, AuditAction.WORKER_DRAIN, AuditTarget.WORKER, "all",
           affected=len(asked), details={"worker_ids": sorted(asked)})  # fmt: skip
    return ngettext(
        "Asked every worker to shut down gracefully (%(num)s process).",
        "Asked every worker to shut down gracefully (%(num)s processes).",
        len(asked),
    )


def _workers(session: Session) -> list[Row]:
    return JobInspector(psycopg_connection(session)).workers()
