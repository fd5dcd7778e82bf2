"""Executions: the filtered list with counts, one execution, and the actions on it."""

from collections.abc import Callable

from flask import abort, flash, redirect, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user

from blueprints.auth.access import role_required
from blueprints.auth.routes import safe_next
from blueprints.inputs import query_int
from blueprints.links import query_args
from blueprints.queues.common import READERS, render_console, tenant_id
from blueprints.scoping import chosen_tenant, visible_tenant_id
from blueprints.workflows import bp
from blueprints.workflows.forms import EventForm, ExecutionActionForm, ExecutionFilterForm
from console import workflow_actions
from console.errors import ActionRefused
from jobqueue.enqueue import psycopg_connection
from models import db
from workflows.store import WorkflowInspector

PAGE = 50
ACTORS = READERS  # HR admins act on their tenant's executions (approvals), platform admins on all


def inspector() -> WorkflowInspector:
    return WorkflowInspector(psycopg_connection(db.session))


@bp.get("/")
@role_required(*READERS)
@query_args("tenant", "name", "status", "waiting_on", "started_from", "started_to", "before")
def execution_list() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    form = ExecutionFilterForm(request.args)
    reader = inspector()
    rows = reader.executions(form.criteria(tenant_id(tenant)), query_int("before"), PAGE + 1)
    page = render_console(
        "workflows/execution_list.html",
        tenant,
        form=form,
        executions=rows[:PAGE],
        counts=reader.counts(tenant_id(tenant)),
        next_before=rows[PAGE - 1]["id"] if len(rows) > PAGE else None,
    )
    return page, 400 if form.errors else 200


@bp.get("/<int:execution_id>")
@role_required(*READERS)
def execution_detail(execution_id: int) -> ResponseReturnValue:
    reader = inspector()
    execution = reader.execution(execution_id, visible_tenant_id())
    if execution is None:
        abort(404)
    waits = reader.waits(execution_id)
    open_wait = next((wait for wait in waits if wait["satisfied_at"] is None), None)
    event_form = EventForm(data={"key": open_wait["key"] if open_wait else ""})
    return render_console(
        "workflows/execution_detail.html",
        None,
        filtered=False,
        execution=execution,
        steps=reader.steps(execution_id),
        waits=waits,
        open_wait=open_wait,
        jobs=reader.jobs(execution_id, execution["tenant_id"]),
        event_form=event_form,
        action_form=ExecutionActionForm(),
    )


@bp.post("/<int:execution_id>/event")
@role_required(*ACTORS)
def execution_send_event(execution_id: int) -> ResponseReturnValue:
    form = EventForm()
    if not form.validate():
        return _back(
            execution_id, form.next.data, error=_("Give the event's key (and JSON, if any).")
        )
    return _act(
        execution_id,
        form.next.data,
        lambda: workflow_actions.send(
            db.session,
            current_user,
            execution_id,
            visible_tenant_id(),
            form.key.data or "",
            workflow_actions.parse_payload(form.payload.data or ""),
        ),
    )


@bp.post("/<int:execution_id>/cancel")
@role_required(*ACTORS)
def execution_cancel(execution_id: int) -> ResponseReturnValue:
    form = ExecutionActionForm()
    return _act(
        execution_id,
        form.next.data,
        lambda: workflow_actions.cancel(
            db.session, current_user, execution_id, visible_tenant_id()
        ),
    )


@bp.post("/<int:execution_id>/resume")
@role_required(*ACTORS)
def execution_resume(execution_id: int) -> ResponseReturnValue:
    form = ExecutionActionForm()
    return _act(
        execution_id,
        form.next.data,
        lambda: workflow_actions.resume(
            db.session, current_user, execution_id, visible_tenant_id()
        ),
    )


def _act(
    execution_id: int, next_page: str | None, action: Callable[[], str]
) -> ResponseReturnValue:
    """Run the action in the request's transaction and commit it with its audit row; a refusal
    changes nothing and says why."""
    try:
        message = action()
    except ActionRefused as refusal:
        db.session.rollback()
        return _back(execution_id, next_page, error=str(refusal))
    db.session.commit()
    flash(message, "success")
    return _back(execution_id, next_page)


def _back(
    execution_id: int, next_page: str | None, error: str | None = None
) -> ResponseReturnValue:
    if error:
        flash(error, "error")
    target = safe_next(next_page) or url_for(
        "workflows.execution_detail", execution_id=execution_id
    )
    return redirect(target, 303)
