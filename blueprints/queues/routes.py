"""Queues: the overview of every queue, one queue's figures and graphs, pausing; the workers
and their graceful shutdown; the audit log."""

from flask import abort, redirect, request, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user

from blueprints.auth.access import role_required
from blueprints.auth.routes import home_for
from blueprints.engine import inspector
from blueprints.inputs import query_int
from blueprints.links import query_args
from blueprints.queues import bp, confirmations
from blueprints.queues.common import OPERATORS, READERS, act, render_console, tenant_id
from blueprints.queues.forms import ActionForm, RateLimitForm
from blueprints.scoping import chosen_tenant, scoped
from console import actions, charts, figures, workers
from console.errors import ActionRefused
from console.formatting import PERIOD_NAMES
from jobqueue.enqueue import psycopg_connection
from models import AuditEntry, db
from workflows.store import WorkflowInspector

AUDIT_PAGE = 50


@bp.get("/")
def index() -> ResponseReturnValue:
    if not current_user.is_authenticated:
        return redirect(url_for("auth.login"))
    return redirect(home_for(current_user.role))


@bp.get("/queues/")
@role_required(*READERS)
@query_args("tenant")
def queue_overview() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    overview = figures.overview(inspector(), tenant_id(tenant))
    workflow_counts = WorkflowInspector(psycopg_connection(db.session)).counts(tenant_id(tenant))
    return render_console(
        "queues/queue_overview.html", tenant, overview=overview, workflow_counts=workflow_counts
    )


@bp.get("/queues/<name>")
@role_required(*READERS)
@query_args("tenant", "window")
def queue_detail(name: str) -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    window = charts.WINDOWS.get(request.args.get("window", charts.DEFAULT_WINDOW))
    overview = figures.overview(inspector(), tenant_id(tenant), queue=name)
    if window is None or not overview.queues:
        abort(404)
    rate = inspector().queue_rate(name)
    rate_form = RateLimitForm()
    if rate is not None:
        rate_form.period.data = PERIOD_NAMES.get(rate["rate_period_seconds"], "second")
    return render_console(
        "queues/queue_detail.html",
        tenant,
        queue=overview.queues[0],
        tenants=inspector().queue_tenants(name, tenant_id(tenant)),
        rate=rate,
        rate_form=rate_form,
        window=window,
        windows=charts.WINDOWS,
        action_form=ActionForm(),
        pause=confirmations.pause_queue(name),
    )


@bp.post("/queues/<name>/pause")
@role_required(*OPERATORS)
def queue_pause(name: str) -> ResponseReturnValue:
    back = url_for("queues.queue_detail", name=name)
    pause = confirmations.pause_queue(name)
    return act(lambda: actions.pause_queue(db.session, current_user, name), back, pause)


@bp.post("/queues/<name>/rate-limit")
@role_required(*OPERATORS)
def queue_rate_limit(name: str) -> ResponseReturnValue:
    back = url_for("queues.queue_detail", name=name)
    form = RateLimitForm()

    def set_limit() -> str:
        if not form.validate():
            raise ActionRefused(
                _("The limit must be a whole number from 1 to 1,000,000, or empty.")
            )
        return actions.set_rate_limit(
            db.session, current_user, name, form.limit.data, form.period.data
        )

    return act(set_limit, back)


@bp.post("/queues/<name>/resume")
@role_required(*OPERATORS)
def queue_resume(name: str) -> ResponseReturnValue:
    back = url_for("queues.queue_detail", name=name)
    return act(lambda: actions.resume_queue(db.session, current_user, name), back)


@bp.get("/workers/")
@role_required(*OPERATORS)
@query_args("part")
def worker_list() -> ResponseReturnValue:
    found = workers.tree(inspector().workers())
    template = (
        "queues/_worker_table.html" if request.args.get("part") else "queues/worker_list.html"
    )
    return render_console(
        template,
        None,
        filtered=False,
        workers=found,
        action_form=ActionForm(),
        drain=confirmations.drain_worker,
        drain_all=confirmations.drain_all(),
    )


@bp.post("/workers/<int:worker_id>/drain")
@role_required(*OPERATORS)
def worker_drain(worker_id: int) -> ResponseReturnValue:
    back = url_for("queues.worker_list")
    drain = confirmations.drain_worker(worker_name(worker_id))
    return act(lambda: actions.drain_worker(db.session, current_user, worker_id), back, drain)


def worker_name(worker_id: int) -> str:
    """The name a shutdown question calls the worker by."""
    found = (row["name"] for row in inspector().workers() if row["id"] == worker_id)
    return next(found, f"worker {worker_id}")


@bp.post("/workers/drain")
@role_required(*OPERATORS)
def worker_drain_all() -> ResponseReturnValue:
    back = url_for("queues.worker_list")
    drain = confirmations.drain_all()
    return act(lambda: actions.drain_all_workers(db.session, current_user), back, drain)


@bp.get("/audit/")
@role_required(*READERS)
@query_args("tenant", "before")
def audit_list() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    query = scoped(AuditEntry).order_by(AuditEntry.id.desc()).limit(AUDIT_PAGE + 1)
    if tenant is not None:
        query = query.where(AuditEntry.tenant_id == tenant.id)
    if before := query_int("before"):
        query = query.where(AuditEntry.id < before)
    entries = db.session.scalars(query).all()
    return render_console(
        "queues/audit_list.html",
        tenant,
        entries=entries[:AUDIT_PAGE],
        next_before=entries[AUDIT_PAGE - 1].id if len(entries) > AUDIT_PAGE else None,
    )
