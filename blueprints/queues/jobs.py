"""Jobs: the filtered list, one job with its history and why it is where it is, its payload,
the actions on one job, and the scheduled jobs."""

from datetime import datetime

from flask import Response, abort, current_app, request, url_for
from flask.typing import ResponseReturnValue
from flask_login import current_user

from blueprints.auth.access import role_required
from blueprints.engine import inspector
from blueprints.inputs import parse_id, query_int
from blueprints.links import query_args
from blueprints.queues import bp, confirmations
from blueprints.queues.common import OPERATORS, READERS, act, render_console, tenant_id
from blueprints.queues.forms import ActionForm, JobFilterForm
from blueprints.scoping import chosen_tenant
from console import actions, search
from console.explain import explain
from models import db

PAGE = 50
PAYLOAD_SHOWN = 10_000  # characters of the pretty-printed payload on the job page


@bp.get("/jobs/")
@role_required(*READERS)
@query_args("tenant", "state", "queue", "task", "error", "payload", "before")
def job_list() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    form = JobFilterForm(request.args)
    before = query_int("before")
    engine = inspector()
    where = form.criteria(tenant_id(tenant))
    bounded = search.bound(engine, where, before)
    rows = engine.jobs(search.within(where, bounded), before, PAGE + 1)
    page = render_console(
        "queues/job_list.html",
        tenant,
        form=form,
        jobs=rows[:PAGE],
        next_before=rows[PAGE - 1]["id"] if len(rows) > PAGE else None,
        bounded=bounded,
        window=search.WINDOW,
    )
    return page, 400 if form.errors else 200


@bp.get("/jobs/<int:job_id>")
@role_required(*READERS)
@query_args("part")
def job_detail(job_id: int) -> ResponseReturnValue:
    tenant = chosen_tenant(None)
    engine = inspector()
    job = engine.job(job_id, tenant_id(tenant), PAYLOAD_SHOWN)
    if job is None:
        abort(404)
    template = "queues/_job_body.html" if request.args.get("part") else "queues/job_detail.html"
    return render_console(
        template,
        tenant,
        filtered=False,
        job=job,
        why=explain(job, operator=current_user.is_platform_admin),
        attempts=engine.attempts(job_id),
        trace_url=current_app.config["PAUTA_TRACE_URL_TEMPLATE"],
        action_form=ActionForm(),
        discard=confirmations.discard_job(job_id),
    )


@bp.get("/jobs/<int:job_id>/payload")
@role_required(*READERS)
def job_payload(job_id: int) -> ResponseReturnValue:
    """The whole payload as plain text (the job page shows its first characters)."""
    payload = inspector().payload(job_id, tenant_id(chosen_tenant(None)))
    if payload is None:
        abort(404)
    return Response(payload, mimetype="text/plain")


@bp.post("/jobs/<int:job_id>/requeue")
@role_required(*OPERATORS)
def job_requeue(job_id: int) -> ResponseReturnValue:
    back = url_for("queues.job_detail", job_id=job_id)
    return act(lambda: actions.requeue_job(db.session, current_user, job_id), back)


@bp.post("/jobs/<int:job_id>/cancel")
@role_required(*OPERATORS)
def job_cancel(job_id: int) -> ResponseReturnValue:
    back = url_for("queues.job_detail", job_id=job_id)
    return act(lambda: actions.cancel_job(db.session, current_user, job_id), back)


@bp.post("/jobs/<int:job_id>/run-now")
@role_required(*OPERATORS)
def job_run_now(job_id: int) -> ResponseReturnValue:
    back = url_for("queues.job_detail", job_id=job_id)
    return act(lambda: actions.run_job_now(db.session, current_user, job_id), back)


@bp.post("/jobs/<int:job_id>/discard")
@role_required(*OPERATORS)
def job_discard(job_id: int) -> ResponseReturnValue:
    back = url_for("queues.job_detail", job_id=job_id)
    discard = confirmations.discard_job(job_id)
    return act(lambda: actions.discard_job(db.session, current_user, job_id), back, discard)


@bp.get("/scheduled/")
@role_required(*READERS)
@query_args("tenant", "queue", "after")
def scheduled_list() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    queue = request.args.get("queue") or None
    rows = inspector().scheduled(tenant_id(tenant), queue, _after(), PAGE + 1)
    last = rows[PAGE - 1] if len(rows) > PAGE else None
    return render_console(
        "queues/scheduled_list.html",
        tenant,
        queue=queue,
        jobs=rows[:PAGE],
        next_after=f"{last['available_at'].isoformat()},{last['id']}" if last else None,
        action_form=ActionForm(),
    )


def _after() -> tuple[datetime, int] | None:
    """The keyset of the scheduled list's next page: ``?after=<available_at>,<id>``, as the
    "Later jobs" link gives it; None when absent, 400 when malformed."""
    after = request.args.get("after", "")
    if not after:
        return None
    moment, _, job_id = after.rpartition(",")
    try:
        when = datetime.fromisoformat(moment)
    except ValueError:
        when = None
    if when is None:
        abort(400, "The query parameter 'after' must be <time>,<job id>, as the link gives it.")
    return when, parse_id("after", job_id)
