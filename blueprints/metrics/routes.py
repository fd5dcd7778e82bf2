"""JSON for the console's live refresh and its Chart.js graphs."""

from datetime import UTC, datetime

from flask import Blueprint, abort, jsonify, request, url_for
from flask.typing import ResponseReturnValue

from blueprints.auth.access import role_required
from blueprints.engine import inspector
from blueprints.links import query_args
from blueprints.queues.common import READERS, tenant_id, tenant_slug
from blueprints.scoping import chosen_tenant
from console import charts, figures

bp = Blueprint("metrics", __name__, url_prefix="/metrics")


@bp.get("/figures.json")
@role_required(*READERS)
@query_args("tenant", "queue")
def figures_json() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    queue = request.args.get("queue") or None
    overview = figures.overview(inspector(), tenant_id(tenant), queue)
    if queue is not None and not overview.queues:
        abort(404)
    body = overview.as_json()
    for item in body["queues"]:
        item["url"] = url_for("queues.queue_detail", name=item["queue"], tenant=tenant_slug(tenant))
    return jsonify(
        tenant=tenant and tenant.slug,
        generated_at=datetime.now(UTC).strftime("%H:%M:%S UTC"),
        **body,
    )


@bp.get("/series.json")
@role_required(*READERS)
@query_args("tenant", "queue", "window")
def series_json() -> ResponseReturnValue:
    tenant = chosen_tenant(request.args.get("tenant"))
    queue = request.args.get("queue") or None
    window = charts.WINDOWS.get(request.args.get("window", charts.DEFAULT_WINDOW))
    engine = inspector()
    if window is None or (queue is not None and not engine.queue_live(None, queue)):
        abort(404)
    return jsonify(charts.series(engine, queue, tenant_id(tenant), window))
