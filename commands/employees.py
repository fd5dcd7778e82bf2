"""`flask --app app employees import FILE --tenant SLUG`: import employees from a CSV file.

The same import as the page's: the file is stored and its job enqueued, and a worker serving the
``default`` queue applies it. ``--wait`` follows the job until it is done and prints the report's
counts and refused rows; the exit status is then 1 if the import failed.
"""

import time
from pathlib import Path

import click
from flask.cli import AppGroup
from sqlalchemy import select

from hr.errors import DomainError
from hr.imports import job_over, report_rows, start_import
from models import EmployeeImport, Tenant, db
from models.imports import ImportState, RowOutcome

employees_cli = AppGroup("employees", help="Import employees.")

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
