"""What an audit entry says, as a sentence: "Requeued dead job #12 (send_mail) with 5 more
attempts." instead of its raw details. Pure: works on the entry's columns, so the audit page and
its tests need nothing else."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from flask_babel import gettext as _

from console.formatting import count, plural, rate_text, utc
from models.audit import AuditAction, AuditEntry, AuditTarget

IDS_SHOWN = 20  # job or worker ids written out; the rest are counted


def sentence(entry: AuditEntry) -> str:
    return describe(entry.action, entry.target_type, entry.target_id, entry.affected, entry.details)


def describe(
    action: str, target_type: str, target_id: str, affected: int, details: Mapping[str, Any]
) -> str:
    task = details.get("task")
    of_task = f" ({task})" if task else ""
    if target_type == AuditTarget.FAILURE_GROUP:
        return _group(action, affected, details)
    if action == AuditAction.JOB_REQUEUE:
        was = f"{details['was']} " if details.get("was") else ""
        budget = details.get("attempt_budget")
        more = f" with {plural(budget, 'more attempt')}" if budget else ""
        return f"Requeued {was}job #{target_id}{of_task}{more}."
    if action == AuditAction.JOB_CANCEL:
        if details.get("was") == "running":
            return _("Asked running job #%(job)s%(task)s to stop.", job=target_id, task=of_task)
        return f"Cancelled job #{target_id}{of_task}: it will not run."
    if action == AuditAction.JOB_RUN_NOW:
        due = details.get("was_due")
        was_due = f"; it was due {utc(datetime.fromisoformat(due))}" if due else ""
        return f"Made job #{target_id}{of_task} run now{was_due}."
    if action == AuditAction.JOB_DISCARD:
        error = details.get("last_error")
        why = f", whose last error was “{_first_line(error)}”" if error else ""
        return f"Discarded dead job #{target_id}{of_task}{why}."
    if action == AuditAction.QUEUE_PAUSE:
        return f"Paused queue {target_id}: workers claim none of its jobs until it is resumed."
    if action == AuditAction.QUEUE_RESUME:
        return f"Resumed queue {target_id}."
    if action == AuditAction.QUEUE_RATE_LIMIT:
        limit, seconds = details.get("limit"), details.get("period_seconds") or 1.0
        if not limit:
            return _("Removed the rate limit of queue %(queue)s.", queue=target_id)
        return _(
            "Set the rate limit of queue %(queue)s: %(rate)s.",
            queue=target_id,
            rate=rate_text(limit, seconds),
        )
    if action == AuditAction.WORKER_DRAIN:
        return _drain(target_id, affected, details)
    if action == AuditAction.EMPLOYEE_VIEW:
        return _(
            "Opened employee #%(id)s's record, their reviews' comments included.", id=target_id
        )
    if action == AuditAction.EMPLOYEE_ERASE:
        pseudonym = details.get("pseudonym", "")
        return _("Erased employee #%(id)s: now %(pseudonym)s.", id=target_id, pseudonym=pseudonym)
    if action == AuditAction.EMPLOYEE_EXPORT:
        export = details.get("export_id", "")
        return _("Asked for everything about employee #%(id)s (export %(export)s).",
                 id=target_id, export=export)  # fmt: skip
    if action == AuditAction.EMPLOYEE_EXPORT_DOWNLOAD:
        export, kind = details.get("export_id", ""), str(details.get("format", "")).upper()
        return _("Downloaded export %(export)s of employee #%(id)s (%(kind)s).",
                 export=export, id=target_id, kind=kind)  # fmt: skip
    if action == AuditAction.WORKFLOW_EVENT:
        return f"Sent event “{details.get('key')}” to workflow execution #{target_id}."
    if action == AuditAction.WORKFLOW_CANCEL:
        return f"Cancelled workflow execution #{target_id} (it was {details.get('was')})."
    if action == AuditAction.WORKFLOW_RESUME:
        step = details.get("step")
        from_step = f" from its failed step “{step}”" if step else ""
        return f"Resumed failed workflow execution #{target_id}{from_step}."
    return f"{action} on {target_type} {target_id}."


def _group(action: str, affected: int, details: Mapping[str, Any]) -> str:
    verb = "Requeued" if action == AuditAction.JOB_REQUEUE else "Discarded"
    which = "the jobs ticked" if details.get("selected") else "the whole group"
    task = details.get("task")
    jobs = plural(affected, f"dead {task} job" if task else "dead job")
    return f"{verb} {jobs} of a failure group ({which}): {ids(details.get('job_ids', []))}."


def _drain(target_id: str, affected: int, details: Mapping[str, Any]) -> str:
    processes = plural(affected, "process", "processes")
    who = (
        "every running worker" if target_id == "all" else details.get("name", f"worker {target_id}")
    )
    return f"Asked {who} to shut down gracefully ({processes})."


def ids(values: Sequence[int]) -> str:
    """ "#1, #2 and #3", at most IDS_SHOWN of them, then how many more."""
    shown = [f"#{value}" for value in values[:IDS_SHOWN]]
    rest = len(values) - len(shown)
    if rest:
        return f"{', '.join(shown)} and {count(rest)} more"
    if len(shown) < 2:
        return "".join(shown)
    return f"{', '.join(shown[:-1])} and {shown[-1]}"


def _first_line(text: str, limit: int = 120) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
