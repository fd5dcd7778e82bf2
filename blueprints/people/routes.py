"""The people pages: the employee list and an employee's record (its reading audited), who read
it, and employee imports.

Employee imports. The upload only stores the file and enqueues its job, so it answers at
once; the detail page follows the job with a progress bar (our bundled script polling
``import_progress``), then shows the report. Refusals are answered in one place
(:func:`refused`)."""

import csv
import io
import json
from typing import Any

from flask import Blueprint, Response, abort, current_app, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.exceptions import RequestEntityTooLarge

from blueprints.auth.access import role_required
from blueprints.confirmation import Confirmation, ask, confirmed
from blueprints.inputs import accepts_files
from blueprints.people.forms import EmployeeImportForm, RetentionForm
from blueprints.scoping import get_or_404, scoped
from hr import erasure, exports, imports, records, retention_settings
from hr.employee_csv import MAX_BYTES
from hr.errors import DomainError, StateConflict
from models import DataExport, Employee, EmployeeImport, db
from models.imports import RowOutcome
from models.people import Role

bp = Blueprint("people", __name__)

HR = (Role.HR_STAFF, Role.HR_ADMIN)

RECENT_IMPORTS = 20
SHOWN_ROWS = 1000  # of each outcome on the page; the CSV report has them all
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet would run as a formula


@bp.errorhandler(DomainError)
def refused(error: DomainError) -> ResponseReturnValue:
    """Nothing was started: the reason above the upload form."""
    db.session.rollback()
    flash(str(error), "error")
    return redirect(url_for("people.import_list"), 303)


@bp.errorhandler(RequestEntityTooLarge)
def too_large(error: RequestEntityTooLarge) -> ResponseReturnValue:
    flash(
        _("The file is larger than %(num)s MiB: split it in parts.", num=MAX_BYTES // 2**20),
        "error",
    )
    return redirect(url_for("people.import_list"), 303)


@bp.get("/people/")
@role_required(*HR)
def employee_list() -> ResponseReturnValue:
    people = records.employees_of(db.session, current_user.tenant_id)
    return render_template("people/employee_list.html", people=people)


@bp.get("/people/<int:employee_id>")
@role_required(*HR)
def employee_detail(employee_id: int) -> ResponseReturnValue:
    """The record, review comments included: the audit log records who read it."""
    employee = get_or_404(Employee, employee_id)
    record = records.read_record(db.session, current_user, employee)
    db.session.commit()
    return render_template("people/employee_detail.html", record=record)


@bp.get("/people/<int:employee_id>/access")
@role_required(Role.HR_ADMIN)
def employee_access(employee_id: int) -> ResponseReturnValue:
    employee = get_or_404(Employee, employee_id)
    entries = records.access_log(db.session, employee)
    return render_template("people/employee_access.html", employee=employee, entries=entries)


@bp.get("/people/<int:employee_id>/erase")
@role_required(Role.HR_ADMIN)
def employee_erase_form(employee_id: int) -> ResponseReturnValue:
    """What erasing the person does, with its button; or why they cannot be erased now."""
    employee = get_or_404(Employee, employee_id)
    reason = erasure.refusal(db.session, employee, current_user)
    db.session.rollback()  # the cycles' locks are for the erasure itself
    return render_template(
        "people/employee_erase.html",
        employee=employee,
        reason=reason,
        confirmation=erase_confirmation(employee),
    )


@bp.post("/people/<int:employee_id>/erase")
@role_required(Role.HR_ADMIN)
def employee_erase(employee_id: int) -> ResponseReturnValue:
    employee = get_or_404(Employee, employee_id)
    back = url_for("people.employee_erase_form", employee_id=employee.id)
    if not confirmed():
        return ask(erase_confirmation(employee), back)
    try:
        done = erasure.erase_employee(db.session, current_user, employee.id, employee.tenant_id)
    except StateConflict as refusal:
        db.session.rollback()
        flash(str(refusal), "error")
        return redirect(back, 303)
    db.session.commit()
    flash(
        _(
            "Erased: the record is now “%(pseudonym)s”; comments removed: %(comments)d;"
            " accounts deleted: %(accounts)d.",
            pseudonym=done.pseudonym,
            comments=done.comments_removed,
            accounts=done.accounts_deleted,
        ),
        "success",
    )
    return redirect(url_for("people.employee_list"), 303)


def erase_confirmation(employee: Employee) -> Confirmation:
    return Confirmation(
        _("Erase %(name)s?", name=employee.name),
        _(
            "Their name and address become a pseudonym, the comments of every review they wrote"
            " or received are deleted, their account is deleted and their data is scrubbed from"
            " jobs and the audit log. Ratings stay, unlinked. It cannot be undone."
        ),
        _("Erase for good"),
    )


@bp.post("/people/<int:employee_id>/exports")
@role_required(Role.HR_ADMIN)
def export_create(employee_id: int) -> ResponseReturnValue:
    """Ask for everything about the person: a job builds it; the page follows it."""
    employee = get_or_404(Employee, employee_id)
    days = exports.link_days(current_app.config["PAUTA_EXPORT_LINK_DAYS"])
    export = exports.start_export(db.session, employee, current_user, days)
    db.session.commit()
    return redirect(url_for("people.export_detail", export_id=export.id), 303)


@bp.get("/people/exports/<int:export_id>")
@role_required(Role.HR_ADMIN)
def export_detail(export_id: int) -> ResponseReturnValue:
    export = get_or_404(DataExport, export_id)
    return render_template("people/export_detail.html", **export_status_of(export))


@bp.get("/people/exports/<int:export_id>/progress")
@role_required(Role.HR_ADMIN)
def export_progress(export_id: int) -> ResponseReturnValue:
    """The part of the export page that changes, for its script to refresh."""
    export = get_or_404(DataExport, export_id)
    return render_template("people/_export_progress.html", **export_status_of(export))


@bp.get("/people/exports/download/<token>/<kind>")
@role_required(Role.HR_ADMIN)
def export_download(token: str, kind: str) -> ResponseReturnValue:
    """The files, to the HR admin who asked only, until the link expires (404 otherwise)."""
    export = exports.downloadable(db.session, token, current_user)
    if export is None or kind not in ("json", "html"):
        abort(404)
    exports.record_download(db.session, export, current_user, kind)
    db.session.commit()
    if kind == "json":
        body = json.dumps(export.content_json, ensure_ascii=False, indent=2)
        mimetype = "application/json"
    else:
        body, mimetype = export.content_html or "", "text/html"
    name = f"personal-data-{export.employee_id}-{export.id}.{kind}"
    return Response(
        body, mimetype=mimetype, headers={"Content-Disposition": f"attachment; filename={name}"}
    )


def export_status_of(export: DataExport) -> dict[str, Any]:
    employee = db.session.get_one(Employee, export.employee_id)
    job_over = exports.job_over(db.session, export)
    return {
        "export": export,
        "employee": employee,
        "job_over": job_over,
        "done": export.state not in exports.UNDER_WAY or job_over is not None,
        "mine": export.requested_by == current_user.id,
        "expired": exports.expired(db.session, export),
    }


@bp.get("/people/retention")
@role_required(Role.HR_ADMIN)
def retention() -> ResponseReturnValue:
    """The tenant's retention policy, and what its last runs removed."""
    policy = retention_settings.policy_of(db.session, current_user.tenant_id)
    return render_retention(RetentionForm(obj=policy))


@bp.post("/people/retention")
@role_required(Role.HR_ADMIN)
def retention_save() -> ResponseReturnValue:
    form = RetentionForm()
    if not form.validate_on_submit():
        return render_retention(form)
    policy = retention_settings.Policy(form.comment_years.data, form.audit_detail_years.data)
    retention_settings.save_policy(db.session, current_user, current_user.tenant_id, policy)
    db.session.commit()
    flash(_("Retention policy saved: the maintenance applies it once a day."), "success")
    return redirect(url_for("people.retention"), 303)


def render_retention(form: RetentionForm) -> str:
    runs = retention_settings.recent_runs(db.session, current_user.tenant_id)
    return render_template("people/retention.html", form=form, runs=runs)


@bp.get("/people/imports/")
@role_required(Role.HR_ADMIN)
def import_list() -> ResponseReturnValue:
    return render_import_list(EmployeeImportForm())


@bp.post("/people/imports/")
@role_required(Role.HR_ADMIN)
@accepts_files("file")
def import_create() -> ResponseReturnValue:
    form = EmployeeImportForm()
    if not form.validate_on_submit():
        return render_import_list(form)
    upload = form.file.data
    started = imports.start_import(
        db.session, current_user.tenant_id, upload.filename, upload.read(), current_user
    )
    db.session.commit()
    return redirect(url_for("people.import_detail", import_id=started.id), 303)


@bp.get("/people/imports/<int:import_id>")
@role_required(Role.HR_ADMIN)
def import_detail(import_id: int) -> ResponseReturnValue:
    started = get_or_404(EmployeeImport, import_id)
    return render_template("people/import_detail.html", **import_report_of(started))


@bp.get("/people/imports/<int:import_id>/progress")
@role_required(Role.HR_ADMIN)
def import_progress(import_id: int) -> ResponseReturnValue:
    """The part of the import page that changes, for its script to refresh."""
    started = get_or_404(EmployeeImport, import_id)
    return render_template("people/_import_progress.html", **import_report_of(started))


@bp.get("/people/imports/<int:import_id>/report.csv")
@role_required(Role.HR_ADMIN)
def import_report(import_id: int) -> ResponseReturnValue:
    """Every line of the file and what became of it."""
    started = get_or_404(EmployeeImport, import_id)
    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(["line", "email", "name", "outcome", "note"])
    for outcome in RowOutcome:
        for row in imports.report_rows(db.session, started, outcome):
            note = cell(row.note or "")
            writer.writerow([row.line, cell(row.email), cell(row.name), row.outcome, note])
    return Response(
        text.getvalue(),
        mimetype="text/csv",
        headers={"Content-Disposition": f"attachment; filename=import-{started.id}-report.csv"},
    )


def render_import_list(form: EmployeeImportForm) -> str:
    recent = db.session.scalars(
        scoped(EmployeeImport).order_by(EmployeeImport.id.desc()).limit(RECENT_IMPORTS)
    )
    return render_template("people/import_list.html", form=form, imports=list(recent))


def import_report_of(started: EmployeeImport) -> dict[str, Any]:
    """What people/_import_progress.html shows: the progress, then the report."""
    job_over = imports.job_over(db.session, started)
    done = started.state not in imports.UNDER_WAY or job_over is not None

    def rows(outcome: RowOutcome) -> list[Any]:
        return imports.report_rows(db.session, started, outcome, SHOWN_ROWS) if done else []

    return {
        "started": started,
        "job_over": job_over,
        "done": done,
        "refused": rows(RowOutcome.REFUSED),
        "updated": rows(RowOutcome.UPDATED),
        "created": rows(RowOutcome.CREATED),
        "shown_rows": SHOWN_ROWS,
    }


def cell(value: str) -> str:
    """A text cell a spreadsheet shows as text, not as a formula (CSV injection)."""
    return "'" + value if value.startswith(FORMULA_START) else value
