"""HR's background tasks: e-mail each reviewer that their reviews are open; import employees;
export everything held about one person; apply the tenants' retention policies.

Imported by the worker (``--tasks hr.tasks``) and by the web app (which enqueues them); it does
not import Flask or the models, so the worker stays free of the web application.

Retries of a notification: up to 5 attempts, full-jitter backoff from
``PAUTA_MAIL_RETRY_BASE_SECONDS`` (default 10 s, doubling) capped at 5 minutes. The variable is
read once, at import; tests set it low. An import is tried 3 times (it resumes where the last
committed batch ended); after the last failure, or a permanent one, the import is marked failed
with the error.
"""

import os
from functools import cache

from hr import lifecycle_mail
from hr.export_job import fail_export, run_export
from hr.import_job import fail_import, run_import
from hr.lifecycle import ESCALATE_CALIBRATION, REMIND_REVIEWER
from hr.mail import MailSettings, send
from hr.notices import load_notice, record_start, render_notice
from hr.retention import apply_retention as apply_policies
from jobqueue import JobContext, PermanentError, RetryPolicy, task

# Also the predicate of the dedup index jobs_notify_reviewer_key (models/cycles.py), which this
# module must not import; tests/hr/test_tasks.py holds the two equal.
NOTIFY_REVIEWER = "hr.notify_reviewer"
NOTIFICATIONS_QUEUE = "notifications"
IMPORT_EMPLOYEES = "hr.import_employees"
IMPORTS_QUEUE = "default"  # served by `make run` and the systemd example
EXPORT_EMPLOYEE = "hr.export_employee"  # on the imports' queue
APPLY_RETENTION = "hr.apply_retention"  # enqueued daily by the maintenance leader (schedules)

MAIL_RETRY = RetryPolicy(
    max_attempts=5,
    base_seconds=float(os.environ.get("PAUTA_MAIL_RETRY_BASE_SECONDS", "10")),
    factor=2.0,
    cap_seconds=300.0,
)

IMPORT_RETRY = RetryPolicy(max_attempts=3, base_seconds=5.0, factor=2.0, cap_seconds=60.0)


@cache
def mail_settings() -> MailSettings:
    return MailSettings.from_environ()


@task(NOTIFY_REVIEWER, queue=NOTIFICATIONS_QUEUE, retry=MAIL_RETRY, pass_context=True)
def notify_reviewer(ctx: JobContext, cycle_id: int, reviewer_id: int) -> None:
    """Send reviewer ``reviewer_id`` the e-mail for cycle ``cycle_id`` of the job's tenant."""
    with ctx.connection() as connection:
        notice = load_notice(connection, ctx.tenant_id, cycle_id, reviewer_id)
        if notice is None:
            raise PermanentError(f"employee {reviewer_id} has no review in cycle {cycle_id}")
        record_start(connection, ctx.tenant_id, notice, ctx.job_id, ctx.attempt)
    if notice.cycle_status != "active":
        raise PermanentError(
            f"cycle {notice.cycle_name!r} is {notice.cycle_status}; the notice is no longer due"
        )
    settings = mail_settings()
    send(render_notice(notice, settings, ctx.tenant_id), settings)


@task(REMIND_REVIEWER, queue=NOTIFICATIONS_QUEUE, retry=MAIL_RETRY, pass_context=True)
def remind_reviewer(ctx: JobContext, cycle_id: int, reviewer_id: int, round: int) -> None:
    """Remind a reviewer of their open reviews (the lifecycle's reminder round ``round``)."""
    settings = mail_settings()
    with ctx.connection() as connection:
        message = lifecycle_mail.reminder(
            connection, settings, ctx.tenant_id, cycle_id, reviewer_id, round
        )
    if message is not None:  # all submitted since: nothing to remind of
        send(message, settings)


@task(ESCALATE_CALIBRATION, queue=NOTIFICATIONS_QUEUE, retry=MAIL_RETRY, pass_context=True)
def escalate_calibration(ctx: JobContext, cycle_id: int, user_id: int, round: int) -> None:
    """Tell an HR admin that the cycle's calibration is overdue."""
    settings = mail_settings()
    with ctx.connection() as connection:
        message = lifecycle_mail.escalation(
            connection, settings, ctx.tenant_id, cycle_id, user_id, round
        )
    send(message, settings)


@task(IMPORT_EMPLOYEES, queue=IMPORTS_QUEUE, retry=IMPORT_RETRY, pass_context=True)
def import_employees(ctx: JobContext, import_id: int) -> None:
    """Apply employee import ``import_id`` of the job's tenant (:mod:`hr.import_job`)."""
    try:
        run_import(ctx.connection, ctx.tenant_id, import_id)
    except Exception as error:
        if isinstance(error, PermanentError) or ctx.attempt >= ctx.job.max_attempts:
            reason = f"{type(error).__name__}: {error}"
            fail_import(ctx.connection, ctx.tenant_id, import_id, reason)
        raise


@task(EXPORT_EMPLOYEE, queue=IMPORTS_QUEUE, retry=IMPORT_RETRY, pass_context=True)
def export_employee(ctx: JobContext, export_id: int) -> None:
    """Build data export ``export_id`` of the job's tenant (:mod:`hr.export_job`)."""
    try:
        run_export(ctx.connection, ctx.tenant_id, export_id)
    except Exception as error:
        if isinstance(error, PermanentError) or ctx.attempt >= ctx.job.max_attempts:
            fail_export(
                ctx.connection, ctx.tenant_id, export_id, f"{type(error).__name__}: {error}"
            )
        raise


@task(APPLY_RETENTION, queue=IMPORTS_QUEUE, retry=IMPORT_RETRY, pass_context=True)
def apply_retention(ctx: JobContext) -> None:
    """Apply every tenant's retention policy (:mod:`hr.retention`), as of the database's time
    moved by ``PAUTA_RETENTION_CLOCK_SHIFT`` (an interval; empty: not moved)."""
    with ctx.connection() as connection:
        apply_policies(connection, ctx.job_id, os.environ.get("PAUTA_RETENTION_CLOCK_SHIFT", ""))
