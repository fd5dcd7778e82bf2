"""What an audit entry says, as a sentence: "Requeued dead job #12 (send_mail) with 5 more
attempts." instead of its raw details. Pure: works on the entry's columns, so the audit page and
its tests need nothing else."""

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from flask_babel import gettext as _
from flask_babel import ngettext

from blueprints.words import job_state
from console.formatting import count, rate_text, utc
from models.audit import AuditAction, AuditEntry, AuditTarget

IDS_SHOWN = 20  # job or worker ids written out; the rest are counted


def sentence(entry: AuditEntry) -> str:
    return describe(entry.action, entry.target_type, entry.target_id, entry.affected, entry.details)


def describe(
    action: str, target_type: str, target_id: str, affected: int, details: Mapping[str, Any]
) -> str:
    task = details.get("task")
    if task:
        job = _("job #%(id)s (%(task)s)", id=target_id, task=task)
    else:
        job = _("job #%(id)s", id=target_id)
    if target_type == AuditTarget.FAILURE_GROUP:
        return _group(action, affected, details)
    if action == AuditAction.JOB_REQUEUE:
        budget = details.get("attempt_budget")
        was = details.get("was")
        if was and budget:
            return ngettext(
                "Requeued %(was)s %(job)s with %(num)s more attempt.",
                "Requeued %(was)s %(job)s with %(num)s more attempts.",
                budget,
                was=job_state(was),
                job=job,
            )
        if budget:
            return ngettext(
                "Requeued %(job)s with %(num)s more attempt.",
                "Requeued %(job)s with %(num)s more attempts.",
                budget,
                job=job,
            )
        return _("Requeued %(job)s.", job=job)
    if action == AuditAction.JOB_CANCEL:
        if details.get("was") == "running":
            return _("Asked %(job)s to stop while it ran.", job=job)
        return _("Cancelled %(job)s: it will not run.", job=job)
    if action == AuditAction.JOB_RUN_NOW:
        due = details.get("was_due")
        if due:
            return _(
                "Made %(job)s run now; it was due %(when)s.",
                job=job,
                when=utc(datetime.fromisoformat(due)),
            )
        return _("Made %(job)s run now.", job=job)
    if action == AuditAction.JOB_DISCARD:
        error = details.get("last_error")
        if error:
            return _(
                "Discarded dead %(job)s, whose last error was “%(error)s”.",
                job=job,
                error=_first_line(error),
            )
        return _("Discarded dead %(job)s.", job=job)
    if action == AuditAction.QUEUE_PAUSE:
        return _(
            "Paused queue %(name)s: workers claim none of its jobs until it is resumed.",
            name=target_id,
        )
    if action == AuditAction.QUEUE_RESUME:
        return _("Resumed queue %(name)s.", name=target_id)
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
        return _("Sent event “%(key)s” to workflow execution #%(id)s.",
                 key=details.get("key"), id=target_id)  # fmt: skip
    if action == AuditAction.WORKFLOW_CANCEL:
        return _("Cancelled workflow execution #%(id)s (it was %(was)s).",
                 id=target_id, was=details.get("was"))  # fmt: skip
    if action == AuditAction.WORKFLOW_RESUME:
        step = details.get("step")
        if step:
            return _("Resumed failed workflow execution #%(id)s from its failed step “%(step)s”.",
                     id=target_id, step=step)  # fmt: skip
        return _("Resumed failed workflow execution #%(id)s.", id=target_id)
    return f"{action} on {target_type} {target_id}."


def _group(action: str, affected: int, details: Mapping[str, Any]) -> str:
    requeued = action == AuditAction.JOB_REQUEUE
    which = _("the jobs ticked") if details.get("selected") else _("the whole group")
    facts = {
        "which": which,
        "ids": ids(details.get("job_ids", [])),
        "task": details.get("task") or "",
    }
    if requeued:
        return ngettext(
            "Requeued %(num)s dead %(task)s job of a failure group (%(which)s): %(ids)s.",
            "Requeued %(num)s dead %(task)s jobs of a failure group (%(which)s): %(ids)s.",
            affected,
            **facts,
        )
    return ngettext(
        "Discarded %(num)s dead %(task)s job of a failure group (%(which)s): %(ids)s.",
        "Discarded %(num)s dead %(task)s jobs of a failure group (%(which)s): %(ids)s.",
        affected,
        **facts,
    )


def _drain(target_id: str, affected: int, details: Mapping[str, Any]) -> str:
    if target_id == "all":
        return ngettext(
            "Asked every running worker to shut down gracefully (%(num)s process).",
            "Asked every running worker to shut down gracefully (%(num)s processes).",
            affected,
        )
    return ngettext(
        "Asked %(name)s to shut down gracefully (%(num)s process).",
        "Asked %(name)s to shut down gracefully (%(num)s processes).",
        affected,
        name=details.get("name", _("worker %(id)s", id=target_id)),
    )


def ids(values: Sequence[int]) -> str:
    """ "#1, #2 and #3", at most IDS_SHOWN of them, then how many more."""
    shown = [f"#{value}" for value in values[:IDS_SHOWN]]
    rest = len(values) - len(shown)
    if rest:
        return _("%(ids)s and %(num)s more", ids=", ".join(shown), num=count(rest))
    if len(shown) < 2:
        return "".join(shown)
    return _("%(ids)s and %(last)s", ids=", ".join(shown[:-1]), last=shown[-1])


def _first_line(text: str, limit: int = 120) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
