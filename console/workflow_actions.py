"""Operator actions on workflow executions: send an event (approve), cancel, resume. Each acts
through the workflow engine and records itself in ``audit_log``, both on the caller's session,
so the act and its record commit together; each returns the sentence to show, or raises
``ActionRefused`` with the engine's reason (nothing changed, nothing recorded)."""

import json
from typing import Any

from flask_babel import gettext as _
from sqlalchemy.orm import Session

from console.audit import record
from console.errors import ActionRefused
from jobqueue.enqueue import psycopg_connection
from models import User
from models.audit import AuditAction, AuditTarget
from workflows import cancel_execution, resume_execution, send_event
from workflows import errors as workflow_errors
from workflows.store import WorkflowStore

MAX_PAYLOAD_CHARS = 10_000


def _owner(session: Session, execution_id: int, tenant_id: int | None) -> int:
    execution = WorkflowStore(psycopg_connection(session)).get(execution_id)
    if execution is None or (tenant_id is not None and execution["tenant_id"] != tenant_id):
        raise ActionRefused(
            _("There is no workflow execution %(id)s in your tenant.", id=execution_id)
        )
    return int(execution["tenant_id"])


def parse_payload(text: str) -> Any:
    """An event's payload as typed in the console: JSON, or nothing (null)."""
    if not text.strip():
        return None
    if len(text) > MAX_PAYLOAD_CHARS:
        limit = format(MAX_PAYLOAD_CHARS, ",")
        raise ActionRefused(_("The payload is longer than %(num)s characters.", num=limit))
    try:
        return json.loads(text)
    except ValueError as error:
        raise ActionRefused(_("The payload is not JSON: %(error)s.", error=error)) from None


def send(
    session: Session,
    actor: User,
    execution_id: int,
    tenant_id: int | None,
    key: str,
    payload: Any,
) -> str:
    owner = _owner(session, execution_id, tenant_id)
    try:
        send_event(session, execution_id, key, payload, decided_by=actor.email, tenant_id=tenant_id)
    except workflow_errors.ActionRefused as refusal:
        raise ActionRefused(_sentence(refusal)) from None
    details = {"key": key, "payload": payload}
    record(session, actor, AuditAction.WORKFLOW_EVENT, AuditTarget.WORKFLOW_EXECUTION,
           execution_id, tenant_id=owner, details=details)  # fmt: skip
    return _(
        "Event “%(key)s” delivered to execution %(id)s; it carries on.", key=key, id=execution_id
    )


def cancel(session: Session, actor: User, execution_id: int, tenant_id: int | None) -> str:
    owner = _owner(session, execution_id, tenant_id)
    try:
        was = cancel_execution(session, execution_id, tenant_id=tenant_id)
    except workflow_errors.ActionRefused as refusal:
        raise ActionRefused(_sentence(refusal)) from None
    record(session, actor, AuditAction.WORKFLOW_CANCEL, AuditTarget.WORKFLOW_EXECUTION,
           execution_id, tenant_id=owner, details={"was": was})  # fmt: skip
    if was == "running":
        return _("Execution %(id)s is cancelled; it stops at its next step.", id=execution_id)
    return _("Execution %(id)s is cancelled; it stops now.", id=execution_id)


def resume(session: Session, actor: User, execution_id: int, tenant_id: int | None) -> str:
    owner = _owner(session, execution_id, tenant_id)
    try:
        forgotten = resume_execution(session, execution_id, tenant_id=tenant_id)
    except workflow_errors.ActionRefused as refusal:
        raise ActionRefused(_sentence(refusal)) from None
    details: dict[str, Any] = {}
    if forgotten is not None:
        details = {"step_id": forgotten["step_id"], "step": forgotten["name"],
                   "error": forgotten["error"]}  # fmt: skip
    record(session, actor, AuditAction.WORKFLOW_RESUME, AuditTarget.WORKFLOW_EXECUTION,
           execution_id, tenant_id=owner, details=details)  # fmt: skip
    return _("Execution %(id)s resumes from its failed step.", id=execution_id)


def _sentence(refusal: Exception) -> str:
    text = str(refusal)
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")
