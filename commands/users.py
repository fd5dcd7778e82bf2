"""`flask --app app users ...`: create log-in accounts from a shell.

The password is asked for twice on a terminal, or read from the first line of standard input
otherwise (``echo "$PASSWORD" | flask --app app users create ...``); never from an argument,
which would land in the shell history and in ``ps``.
"""

import sys

import click
from flask.cli import AppGroup
from sqlalchemy import select

from hr.accounts import create_user, normalize_email
from hr.errors import InvalidInput
from models import Employee, Tenant, db
from models.people import Role

users_cli = AppGroup("users", help="Create and manage log-in accounts.")


def read_password() -> str:
    if sys.stdin.isatty():
        return str(click.prompt("Password", hide_input=True, confirmation_prompt=True))
    return sys.stdin.readline().rstrip("\r\n")


@users_cli.command("create")
@click.option("--tenant", "tenant_slug", required=True, help="Slug of the user's tenant.")
@click.option("--email", required=True, help="E-mail address, also the log-in name.")
@click.option("--role", type=click.Choice([role.value for role in Role]), required=True)
@click.option("--name", default="", help="Display name (default: the e-mail address).")
@click.option(
    "--tenant-name", help="Create the tenant with this display name if it does not exist yet."
)
@click.option(
    "--employee-email", help="Link the user to the employee of the tenant with this e-mail."
)
def create_command(
    tenant_slug: str,
    email: str,
    role: str,
    name: str,
    tenant_name: str | None,
    employee_email: str | None,
) -> None:
    """Create a user; prints its id."""
    tenant = db.session.scalars(select(Tenant).where(Tenant.slug == tenant_slug)).one_or_none()
    if tenant is None:
        if not tenant_name:
            raise click.ClickException(
                f"unknown tenant {tenant_slug!r}; pass --tenant-name to create it"
            )
        tenant = Tenant(slug=tenant_slug, name=tenant_name)
        db.session.add(tenant)
        db.session.flush()
    employee = None
    try:
        if employee_email:
            employee = db.session.scalars(
                select(Employee).where(
                    Employee.tenant_id == tenant.id,
                    Employee.email == normalize_email(employee_email),
                )
            ).one_or_none()
            if employee is None:
                raise InvalidInput(f"tenant {tenant_slug} has no employee {employee_email}")
        user = create_user(
            db.session,
            tenant=tenant,
            email=email,
            name=name,
            role=Role(role),
            password=read_password(),
            employee=employee,
        )
    except InvalidInput as error:
        db.session.rollback()
        raise click.ClickException(str(error)) from None
    db.session.commit()
    click.echo(f"created user {user.id} ({user.email}, {user.role}) in tenant {tenant_slug}")
