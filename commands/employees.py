"""`flask --app app employees import FILE --tenant SLUG`: import employees from a CSV file.
`flask --app app employees export EMAIL --tenant SLUG`: export everything about one person.

The same import as the page's: the file is stored and its job enqueued, and a worker serving the
``default`` queue applies it. ``--wait`` follows the job until it is done and prints the report's
counts and refused rows; the exit status is then 1 if the import failed.

The same export as the page's (a job on the ``default`` queue builds it); ``--out DIR`` waits
for it and writes its JSON file and HTML page into DIR.
"""

import json
import time
from pathlib import Path

import click
from flask.cli import AppGroup
from sqlalchemy import select

from hr import exports
from hr.errors import DomainError
from hr.imports import job_over, report_rows, start_import
from models import DataExport, Employee, EmployeeImport, Tenant, db
from models.imports import ImportState, RowOutcome
from models.privacy import ExportState

employees_cli = AppGroup("employees", help="Import employees; export a person's data.")

POLL_SECONDS = 0.5


@employees_cli.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--tenant", "tenant_slug", required=True, help="Slug of the employees' tenant.")
@click.option("--wait", is_flag=True, help="Follow the import until it is done; print the report.")
def import_command(path: Path, tenant_slug: str, wait: bool) -> None:
    """Import the employees of the CSV file PATH (name, email, department, manager_email)."""
    tenant = db.session.scalars(select(Tenant).where(Tenant.slug == tenant_slug)).one_or_none()
    if tenant is None:
        raise click.ClickException(f"unknown tenant {tenant_slug!r}")
    try:
        started = start_import(db.session, tenant.id, path.name, path.read_bytes(), actor=None)
    except DomainError as error:
        db.session.rollback()
        raise click.ClickException(str(error)) from None
    db.session.commit()
    click.echo(
        f"import {started.id} of {started.filename} ({started.rows:,} rows) queued as job "
        f"{started.job_id}; a worker serving the 'default' queue applies it"
    )
    if wait:
        follow(started.id)


def follow(import_id: int) -> None:
    """Print the progress until the import is done, then its report."""
    shown = -1
    while True:
        db.session.expire_all()
        started = db.session.get_one(EmployeeImport, import_id)
        if started.processed_rows != shown:
            shown = started.processed_rows
            click.echo(f"{started.state}: {shown:,} of {started.total_rows:,} rows")
        if started.state in (ImportState.FINISHED, ImportState.FAILED):
            break
        if ended := job_over(db.session, started):
            raise click.ClickException(f"its job ended ({ended}) before the import was done")
        time.sleep(POLL_SECONDS)
    click.echo(
        f"{started.created_rows:,} created, {started.updated_rows:,} updated, "
        f"{started.unchanged_rows:,} unchanged, {started.refused_rows:,} refused"
    )
    for row in report_rows(db.session, started, RowOutcome.REFUSED):
        click.echo(f"line {row.line}: {row.email}: {row.note}")
    if started.state == ImportState.FAILED:
        raise click.ClickException(f"the import failed: {started.error}")


@employees_cli.command("export")
@click.argument("email")
@click.option("--tenant", "tenant_slug", required=True, help="Slug of the person's tenant.")
@click.option(
    "--days",
    default=exports.DEFAULT_LINK_DAYS,
    show_default=True,
    type=click.IntRange(1, 365),
    help="Days the export is kept for download.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Wait for the export and write its JSON and HTML files into this directory.",
)
def export_command(email: str, tenant_slug: str, days: int, out: Path | None) -> None:
    """Export everything held about the employee with this e-mail address."""
    tenant = db.session.scalars(select(Tenant).where(Tenant.slug == tenant_slug)).one_or_none()
    if tenant is None:
        raise click.ClickException(f"unknown tenant {tenant_slug!r}")
    employee = db.session.scalars(
        select(Employee).where(Employee.tenant_id == tenant.id, Employee.email == email.lower())
    ).one_or_none()
    if employee is None:
        raise click.ClickException(f"no employee of {tenant_slug} has the address {email}")
    export = exports.start_export(db.session, employee, None, days)
    db.session.commit()
    click.echo(
        f"export {export.id} of employee {employee.id} queued as job {export.job_id};"
        " a worker serving the 'default' queue builds it"
    )
    if out is not None:
        write_export(export.id, out)


def write_export(export_id: int, out: Path) -> None:
    """Wait until the export is built; write it as DIR/personal-data-<employee>-<id>.json/.html."""
    while True:
        db.session.expire_all()
        export = db.session.get_one(DataExport, export_id)
        if export.state in (ExportState.FINISHED, ExportState.FAILED):
            break
        if ended := exports.job_over(db.session, export):
            raise click.ClickException(f"its job ended ({ended}) before the export was built")
        time.sleep(POLL_SECONDS)
    if export.state == ExportState.FAILED:
        raise click.ClickException(f"the export failed: {export.error}")
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"personal-data-{export.employee_id}-{export.id}"
    stem.with_suffix(".json").write_text(
        json.dumps(export.content_json, ensure_ascii=False, indent=2), encoding="utf-8"
    )
    stem.with_suffix(".html").write_text(export.content_html or "", encoding="utf-8")
    click.echo(f"wrote {stem}.json and {stem}.html")
