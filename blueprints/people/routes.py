"""Employee imports. The upload only stores the file and enqueues its job, so it answers at
once; the detail page follows the job with a progress bar (our bundled script polling
``import_progress``), then shows the report. Refusals are answered in one place
(:func:`refused`)."""

import csv
import io
from typing import Any

from flask import Blueprint, Response, flash, redirect, render_template, url_for
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.exceptions import RequestEntityTooLarge

from blueprints.auth.access import role_required
from blueprints.inputs import accepts_files
from blueprints.people.forms import EmployeeImportForm
from blueprints.scoping import get_or_404, scoped
from hr import imports
from hr.employee_csv import MAX_BYTES
from hr.errors import DomainError
from models import EmployeeImport, db
from models.imports import RowOutcome
from models.people import Role

bp = Blueprint("people", __name__)

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
