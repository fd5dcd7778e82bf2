"""Failures: dead jobs grouped by fingerprint, one group's jobs, and requeueing or discarding a
whole group or a selection after a confirmation that says how many jobs it will touch."""

from flask import abort, request, url_for
from flask.typing import ResponseReturnValue
from flask_login import current_user

from blueprints.auth.access import role_required
from blueprints.engine import inspector
from blueprints.inputs import query_int, query_ints
from blueprints.links import query_args
from blueprints.queues import bp
from blueprints.queues.common import OPERATORS, READERS, act, render_console, tenant_id
from blueprints.queues.forms import SELECTED, FailureActionForm
from blueprints.scoping import chosen_tenant
from console import actions, failures
from models import db

BULK_ACTIONS = ("requeue", "discard")
PAGE = 100


@bp.get("/failures/")
@role_required(*READERS)
@query_args("tenant", "queue")
def failure_list() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    queue = request.args.get("queue") or None
    groups = inspector().failure_groups(tenant_id(tenant), queue, failures.GROUPS_SHOWN)
    return render_console("queues/failure_list.html", tenant, groups=groups, queue=queue)


@bp.get("/failures/<fingerprint>")
@role_required(*READERS)
@query_args("tenant", "before")
def failure_detail(fingerprint: str) -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    engine = inspector()
    group = engine.failure_group(fingerprint, tenant_id(tenant)) or abort(404)
    before = query_int("before")
    rows = engine.failure_jobs(fingerprint, tenant_id(tenant), before_id=before, limit=PAGE + 1)
    return render_console(
        "queues/failure_detail.html",
        tenant,
        group=group,
        jobs=rows[:PAGE],
        next_before=rows[PAGE - 1]["id"] if len(rows) > PAGE else None,
    )


@bp.get("/failures/<fingerprint>/confirm")
@role_required(*OPERATORS)
@query_args("action", "job", "scope")
def failure_confirm(fingerprint: str) -> ResponseReturnValue:
    """How many jobs a bulk action would touch, and the button that does it."""
    action = request.args.get("action")
    engine = inspector()
    group = engine.failure_group(fingerprint, None)
    if group is None or action not in BULK_ACTIONS:
        abort(404)
    chosen = query_ints("job")
    selected = request.args.get("scope") == SELECTED or bool(chosen)
    touched = failures.selection(engine, fingerprint, None, None, chosen if selected else None)
    form = FailureActionForm(
        data={
            "max_id": touched[0]["id"] if touched else 0,
            "scope": SELECTED if selected else "",
            "jobs": chosen,
        }
    )
    return render_console(
        "queues/failure_confirm.html",
        None,
        filtered=False,
        group=group,
        action=action,
        touched=touched,
        selected=selected,
        form=form,
    )


@bp.post("/failures/<fingerprint>/requeue")
@role_required(*OPERATORS)
def failure_requeue(fingerprint: str) -> ResponseReturnValue:
    form = checked(FailureActionForm())
    back = url_for("queues.failure_list")
    return act(
        lambda: actions.requeue_failures(
            db.session, current_user, fingerprint, form.max_id.data or 0, form.selected()
        ),
        back,
    )


@bp.post("/failures/<fingerprint>/discard")
@role_required(*OPERATORS)
def failure_discard(fingerprint: str) -> ResponseReturnValue:
    form = checked(FailureActionForm())
    back = url_for("queues.failure_list")
    return act(
        lambda: actions.discard_failures(
            db.session, current_user, fingerprint, form.max_id.data or 0, form.selected()
        ),
        back,
    )


def checked(form: FailureActionForm) -> FailureActionForm:
    """The posted bulk action, or 400: a selection that is not made of job ids must not turn
    into the whole group."""
    if not form.validate():
        problems = "; ".join(f"{name}: {' '.join(errors)}" for name, errors in form.errors.items())
        abort(400, f"The action was not taken: {problems}")
    return form
