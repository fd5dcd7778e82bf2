"""Review cycle pages. Each view: authorize, load through the tenant scope, call the domain,
commit, flash, redirect. Refusals from the domain are answered in one place
(:func:`refused`)."""

from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user

from blueprints.auth.access import role_required
from blueprints.confirmation import ask, confirmed
from blueprints.cycles import confirmations
from blueprints.cycles.forms import (
    ActionForm,
    CalibrationForm,
    CycleForm,
    ParticipantFilterForm,
    ParticipantsForm,
    ReviewGenerationForm,
    ReviewSubmissionForm,
)
from blueprints.inputs import query_int
from blueprints.links import query_args, this_page
from blueprints.scoping import get_or_404, scoped
from console import workflow_actions
from console.errors import ActionRefused
from hr import delivery, directory, lifecycle, progress
from hr.activation import activate_cycle
from hr.cycles import cancel_cycle, change_participants, close_cycle, create_cycle, update_cycle
from hr.errors import DomainError, NotFound, StateConflict
from hr.reviews import by_cycle, generate_reviews, reviews_of_reviewer, submit_review
from hr.wording import review_label
from jobqueue.enqueue import psycopg_connection
from models import Employee, Review, ReviewCycle, db
from models.cycles import CycleStatus, ReviewStatus
from models.people import Role

bp = Blueprint("cycles", __name__)
bp.add_app_template_global(review_label)

HR = (Role.HR_STAFF, Role.HR_ADMIN)
HR_READERS = (Role.HR_STAFF, Role.HR_ADMIN, Role.PLATFORM_ADMIN)
REVIEWERS = (Role.EMPLOYEE, Role.HR_STAFF, Role.HR_ADMIN)


@bp.errorhandler(DomainError)
def refused(error: DomainError) -> ResponseReturnValue:
    """The domain said no: nothing was changed. 409 for a state conflict over JSON; for HTML,
    the reason as a flash message on the page the user works from."""
    db.session.rollback()
    if isinstance(error, NotFound):
        abort(404)
    if wants_json():
        status = 409 if isinstance(error, StateConflict) else 422
        return jsonify(error=str(error)), status
    flash(str(error), "error")
    return redirect(page_after_refusal(), 303)


def page_after_refusal() -> str:
    """Where the user reads why: the cycle's page for HR, "My reviews" for a reviewer (an
    employee may not see the cycle pages)."""
    arguments = request.view_args or {}
    if request.endpoint == "cycles.review_submit":
        return url_for("cycles.my_reviews")
    if "cycle_id" in arguments:
        return url_for("cycles.cycle_detail", cycle_id=arguments["cycle_id"])
    return url_for("cycles.cycle_list")


def wants_json() -> bool:
    best = request.accept_mimetypes.best_match(["text/html", "application/json"])
    return request.is_json or best == "application/json"


@bp.get("/cycles/")
@role_required(*HR_READERS)
def cycle_list() -> ResponseReturnValue:
    cycles = progress.cycle_summaries(db.session, scoped(ReviewCycle))
    return render_template("cycles/cycle_list.html", cycles=cycles)


@bp.route("/cycles/new", methods=["GET", "POST"])
@role_required(*HR)
def cycle_create() -> ResponseReturnValue:
    form = CycleForm()
    if form.validate_on_submit():
        cycle = create_cycle(db.session, current_user.tenant_id, form.details())
        db.session.commit()
        flash(
            _("Draft “%(name)s” created. Next: choose its participants.", name=cycle.name),
            "success",
        )
        return redirect(url_for("cycles.cycle_participants", cycle_id=cycle.id), 303)
    return render_template("cycles/cycle_form.html", form=form, cycle=None)


@bp.route("/cycles/<int:cycle_id>/edit", methods=["GET", "POST"])
@role_required(*HR)
def cycle_edit(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    form = CycleForm(obj=cycle)
    if form.validate_on_submit():
        update_cycle(db.session, cycle.tenant_id, cycle.id, form.details())
        db.session.commit()
        flash(_("Cycle details saved."), "success")
        return redirect(url_for("cycles.cycle_detail", cycle_id=cycle.id), 303)
    return render_template("cycles/cycle_form.html", form=form, cycle=cycle)


@bp.get("/cycles/<int:cycle_id>")
@role_required(*HR_READERS)
def cycle_detail(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    return render_template(
        "cycles/cycle_detail.html",
        **cycle_progress_of(cycle),
        reviewees=progress.reviewee_progress(db.session, cycle),
        action_form=ActionForm(),
        confirmations=confirmations,
        life=lifecycle.lifecycle_of(psycopg_connection(db.session), cycle.tenant_id, cycle.id),
        calibration_form=CalibrationForm(),
    )


@bp.post("/cycles/<int:cycle_id>/calibration")
@role_required(Role.HR_ADMIN)
def cycle_calibrate(cycle_id: int) -> ResponseReturnValue:
    """Approve the cycle's calibration, or send it back with a comment: an event to the
    lifecycle's open calibration wait, audited; refused (late, twice) with a sentence."""
    cycle = get_or_404(ReviewCycle, cycle_id)
    back = url_for("cycles.cycle_detail", cycle_id=cycle.id) + "#lifecycle"
    form = CalibrationForm()
    life = lifecycle.lifecycle_of(psycopg_connection(db.session), cycle.tenant_id, cycle.id)
    if not form.validate() or life is None:
        flash(_("Choose a decision; the cycle must have a lifecycle."), "error")
        return redirect(back, 303)
    key = request.form.get("key") or life["calibration_key"] or lifecycle.CALIBRATION
    payload = {"approved": form.decision.data == "approve", "comment": form.comment.data or ""}
    try:
        message = workflow_actions.send(
            db.session, current_user, life["execution"]["id"], cycle.tenant_id, key, payload
        )
    except ActionRefused as refusal:
        db.session.rollback()
        flash(str(refusal), "error")
        return redirect(back, 303)
    db.session.commit()
    flash(message, "success")
    return redirect(back, 303)


@bp.get("/cycles/<int:cycle_id>/report")
@role_required(*HR_READERS)
def cycle_report(cycle_id: int) -> ResponseReturnValue:
    """The results report as a printable page (404 until it is compiled)."""
    cycle = get_or_404(ReviewCycle, cycle_id)
    report = lifecycle.report_of(psycopg_connection(db.session), cycle.tenant_id, cycle.id)
    if report is None or report["state"] != "ready":
        abort(404)
    return render_template("cycles/cycle_report.html", cycle=cycle, report=report)


@bp.get("/cycles/<int:cycle_id>/report.csv")
@role_required(*HR_READERS)
def cycle_report_csv(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    report = lifecycle.report_of(psycopg_connection(db.session), cycle.tenant_id, cycle.id)
    if report is None or report["state"] != "ready":
        abort(404)
    return Response(
        lifecycle.report_csv(report["rows"]),
        mimetype="text/csv",
        headers={"Content-Disposition": f"attachment; filename=cycle-{cycle.id}-report.csv"},
    )


@bp.get("/cycles/<int:cycle_id>/progress")
@role_required(*HR_READERS)
def cycle_progress(cycle_id: int) -> ResponseReturnValue:
    """The part of the cycle page that changes by itself, for its script to refresh."""
    cycle = get_or_404(ReviewCycle, cycle_id)
    return render_template("cycles/_cycle_progress.html", **cycle_progress_of(cycle))


def cycle_progress_of(cycle: ReviewCycle) -> dict[str, Any]:
    """What cycles/_cycle_progress.html shows."""
    notifications = delivery.deliveries(db.session, cycle)
    return {
        "cycle": cycle,
        "participants": progress.participant_count(db.session, cycle),
        "counts": progress.status_counts(db.session, cycle),
        "reviewers": progress.reviewer_progress(db.session, cycle),
        "notifications": notifications,
        "delivery_counts": delivery.delivery_counts(notifications),
        "refreshing": cycle.status == CycleStatus.ACTIVE and delivery.still_pending(notifications),
    }


@bp.route("/cycles/<int:cycle_id>/participants", methods=["GET", "POST"])
@role_required(*HR)
@query_args("manager", "department")
def cycle_participants(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    managers = directory.managers(db.session, cycle.tenant_id)
    filters = ParticipantFilterForm(
        request.args,
        managers=[(manager.id, manager.name) for manager in managers],
        departments=directory.departments(db.session, cycle.tenant_id),
    )
    shown = directory.employees(db.session, cycle.tenant_id, **filters.criteria())
    form = ParticipantsForm()
    form.show(
        [(entry.id, entry.label) for entry in shown],
        directory.participant_ids(db.session, cycle.id),
    )
    if form.validate_on_submit():
        add, remove = form.changes()
        change = change_participants(
            db.session, cycle.tenant_id, cycle.id, add, remove, agreed_drops=form.agreed_drops()
        )
        if not change.applied:
            return render_template(
                "cycles/participants_confirm.html", cycle=cycle, form=form, change=change
            )
        db.session.commit()
        flash(change.summary, "success")
        return redirect(this_page())
    page = render_template(
        "cycles/cycle_participants.html",
        cycle=cycle,
        filters=filters,
        form=form,
        total=progress.participant_count(db.session, cycle),
        reviews=sum(progress.status_counts(db.session, cycle).values()),
    )
    return page, 400 if filters.errors else 200


@bp.route("/cycles/<int:cycle_id>/reviews", methods=["GET", "POST"])
@role_required(*HR)
def reviews_generate(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    form = ReviewGenerationForm()
    if form.validate_on_submit():
        created = generate_reviews(db.session, cycle.tenant_id, cycle.id, form.peers.data or 0)
        db.session.commit()
        flash(
            ngettext(
                "%(num)d review generated. Next: activate the cycle.",
                "%(num)d reviews generated. Next: activate the cycle.",
                created,
            ),
            "success",
        )
        return redirect(url_for("cycles.cycle_detail", cycle_id=cycle.id), 303)
    return render_template(
        "cycles/reviews_generate.html",
        cycle=cycle,
        form=form,
        participants=progress.participant_count(db.session, cycle),
        counts=progress.status_counts(db.session, cycle),
    )


@bp.post("/cycles/<int:cycle_id>/activate")
@role_required(Role.HR_ADMIN)
def cycle_activate(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    if not wants_json() and not confirmed():
        return ask(confirmations.activate(cycle), url_for("cycles.cycle_detail", cycle_id=cycle.id))
    activation = activate_cycle(db.session, cycle.tenant_id, cycle.id, current_user.id)
    db.session.commit()
    if wants_json():
        return jsonify(
            cycle_id=cycle.id,
            status=CycleStatus.ACTIVE,
            reviews_opened=activation.reviews_opened,
            notifications=len(activation.notifications),
        )
    flash(
        _(
            "“%(name)s” is active: %(reviews)s reviews are open and %(reviewers)s reviewers are "
            "being notified.",
            name=cycle.name,
            reviews=activation.reviews_opened,
            reviewers=len(activation.notifications),
        ),
        "success",
    )
    return redirect(url_for("cycles.cycle_detail", cycle_id=cycle.id), 303)


@bp.post("/cycles/<int:cycle_id>/close")
@role_required(Role.HR_ADMIN)
def cycle_close(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    if not wants_json() and not confirmed():
        return ask(confirmations.close(cycle), url_for("cycles.cycle_detail", cycle_id=cycle.id))
    close_cycle(db.session, cycle.tenant_id, cycle.id)
    db.session.commit()
    flash(_("“%(name)s” is closed; no more reviews can be submitted.", name=cycle.name), "success")
    return redirect(url_for("cycles.cycle_detail", cycle_id=cycle.id), 303)


@bp.post("/cycles/<int:cycle_id>/cancel")
@role_required(Role.HR_ADMIN)
def cycle_cancel(cycle_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    if not wants_json() and not confirmed():
        return ask(confirmations.cancel(cycle), url_for("cycles.cycle_detail", cycle_id=cycle.id))
    cancel_cycle(db.session, cycle.tenant_id, cycle.id)
    db.session.commit()
    flash(_("“%(name)s” is cancelled.", name=cycle.name), "success")
    return redirect(url_for("cycles.cycle_detail", cycle_id=cycle.id), 303)


@bp.get("/cycles/<int:cycle_id>/notifications/<int:job_id>")
@role_required(*HR_READERS)
def notification_detail(cycle_id: int, job_id: int) -> ResponseReturnValue:
    cycle = get_or_404(ReviewCycle, cycle_id)
    notification = delivery.delivery(db.session, cycle, job_id)
    if notification is None:
        abort(404)
    return render_template(
        "cycles/notification_detail.html",
        cycle=cycle,
        notification=notification,
        reviewer=get_or_404(Employee, notification.reviewer_id),
        attempts=delivery.delivery_attempts(db.session, job_id),
    )


@bp.get("/my/reviews")
@role_required(*REVIEWERS)
@query_args("cycle")
def my_reviews() -> ResponseReturnValue:
    cycle_id = query_int("cycle")
    reviews = []
    if current_user.employee_id is not None:
        reviews = reviews_of_reviewer(
            db.session, scoped(Review), current_user.employee_id, cycle_id
        )
    return render_template("cycles/my_reviews.html", cycles=by_cycle(reviews), cycle_id=cycle_id)


@bp.route("/my/reviews/<int:review_id>", methods=["GET", "POST"])
@role_required(*REVIEWERS)
def review_submit(review_id: int) -> ResponseReturnValue:
    review = get_or_404(Review, review_id)
    if review.reviewer_id != current_user.employee_id or review.status == ReviewStatus.PENDING:
        abort(404)
    form = ReviewSubmissionForm(obj=review)
    if form.validate_on_submit():
        submit_review(
            db.session,
            review.tenant_id,
            review.reviewer_id,
            review.id,
            form.rating.data,
            form.comments.data or "",
        )
        db.session.commit()
        flash(_("Thank you: your review is submitted."), "success")
        return redirect(url_for("cycles.my_reviews", cycle=review.cycle_id), 303)
    return render_template(
        "cycles/review_form.html",
        review=review,
        form=form,
        cycle=get_or_404(ReviewCycle, review.cycle_id),
        reviewee=get_or_404(Employee, review.reviewee_id),
    )
