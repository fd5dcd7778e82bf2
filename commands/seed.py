"""`flask --app app seed-demo`: a demo tenant to click through.

Creates the tenant ``demo`` with about 40 employees in a manager tree, one user per role (the
platform admin in the ``system`` tenant), and one draft cycle with participants and reviews,
then prints the log-in credentials. Does nothing if the tenant already exists.
"""

import secrets
from dataclasses import dataclass
from datetime import date, timedelta

import click
from flask.cli import with_appcontext
from sqlalchemy import select

from hr.accounts import create_user
from hr.cycles import CycleDetails, change_participants, create_cycle
from hr.demo import create_demo_employees
from hr.reviews import generate_reviews
from models import Employee, Tenant, db
from models.people import Role
from models.tenancy import SYSTEM_TENANT_SLUG

DEMO_TENANT = "demo"
DEMO_EMPLOYEES = 40


@dataclass(frozen=True, slots=True)
class Credentials:
    role: Role
    email: str
    password: str


@click.command("seed-demo")
@with_appcontext
@click.option("--employees", default=DEMO_EMPLOYEES, show_default=True, type=click.IntRange(2))
def seed_demo_command(employees: int) -> None:
    """Build the demo tenant and print how to log in."""
    if db.session.scalars(select(Tenant).where(Tenant.slug == DEMO_TENANT)).first():
        click.echo(f"the tenant {DEMO_TENANT!r} exists already; nothing to do")
        return
    credentials = seed_demo(employees)
    db.session.commit()
    click.echo(f"Demo tenant {DEMO_TENANT!r}: {employees} employees and one draft cycle.")
    click.echo("Log in with:")
    for item in credentials:
        click.echo(f"  {item.role:<15} {item.email:<32} {item.password}")


def seed_demo(employees: int) -> list[Credentials]:
    tenant = Tenant(
        slug=DEMO_TENANT,
        name="Demo Corp",
        default_locale="pt_BR",
        default_time_zone="America/Sao_Paulo",
    )
    db.session.add(tenant)
    db.session.flush()
    people = create_demo_employees(db.session, tenant, employees)
    system = db.session.scalars(select(Tenant).where(Tenant.slug == SYSTEM_TENANT_SLUG)).one()
    accounts = [
        (tenant, Role.HR_ADMIN, _first_in(people, "People")),
        (tenant, Role.HR_STAFF, _first_in(people, "People", skip=1)),
        (tenant, Role.EMPLOYEE, people[-1]),
        (system, Role.PLATFORM_ADMIN, None),
    ]
    credentials = []
    for owner, role, employee in accounts:
        email = employee.email if employee else f"platform-admin@{DEMO_TENANT}.example"
        password = secrets.token_urlsafe(12)
        name = employee.name if employee else "Platform Admin"
        create_user(
            db.session,
            tenant=owner,
            email=email,
            name=name,
            role=role,
            password=password,
            employee=employee,
        )
        credentials.append(Credentials(role, email, password))
    today = date.today()
    cycle = create_cycle(
        db.session,
        tenant.id,
        CycleDetails(
            name=f"{today.year} mid-year review",
            period_start=today.replace(month=1, day=1),
            period_end=today.replace(month=6, day=30),
            due_date=today + timedelta(days=21),
        ),
    )
    change_participants(db.session, tenant.id, cycle.id, {e.id for e in people}, set())
    generate_reviews(db.session, tenant.id, cycle.id, peers=1)
    return credentials


def _first_in(people: list[Employee], department: str, skip: int = 0) -> Employee:
    return [person for person in people if person.department == department][skip]
