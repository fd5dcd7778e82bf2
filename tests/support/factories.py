"""Factories for the review-cycle tests, and helpers that act like a person in a browser.

Build rows inside ``with seeding(app) as session:``; the block commits at its end and the
objects stay readable afterwards (ids, names), detached. Requests made with the test client
run in their own application context, as they would in production.
"""

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from hr.accounts import create_user
from hr.activation import activate_cycle
from hr.cycles import CycleDetails, change_participants, create_cycle
from hr.demo import create_demo_employees
from hr.reviews import generate_reviews
from models import Employee, ReviewCycle, Tenant, User, db
from models.people import Role

PASSWORD = "correct horse battery staple"
_serial = itertools.count(1)
_TOKEN = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


@contextmanager
def seeding(app: Any) -> Iterator[Session]:
    """A session for building test data; commits when the block ends."""
    with app.app_context():
        session = db.session()
        session.expire_on_commit = False
        yield session
        session.commit()


def make_tenant(session: Session, slug: str | None = None) -> Tenant:
    slug = slug or f"tenant{next(_serial)}"
    tenant = Tenant(slug=slug, name=f"{slug.capitalize()} Ltd")
    session.add(tenant)
    session.flush()
    return tenant


def system_tenant(session: Session) -> Tenant:
    return session.scalars(select(Tenant).where(Tenant.slug == "system")).one()


def make_employees(session: Session, tenant: Tenant, count: int, span: int = 5) -> list[Employee]:
    """``count`` employees in a manager tree (see hr.demo), the top person first."""
    return create_demo_employees(session, tenant, count, span)


def make_user(
    session: Session,
    tenant: Tenant,
    role: Role,
    employee: Employee | None = None,
    email: str | None = None,
) -> User:
    """A user whose password is ``PASSWORD``; an e-mail is made up unless given."""
    return create_user(
        session,
        tenant=tenant,
        email=email or f"{role}.{next(_serial)}@{tenant.slug}.example",
        name=f"{role.replace('_', ' ').title()} {tenant.slug}",
        role=role,
        password=PASSWORD,
        employee=employee,
    )


def make_cycle(
    session: Session,
    tenant: Tenant,
    participants: list[Employee] | None = None,
    *,
    peers: int = 0,
    activate_as: User | None = None,
    **details: Any,
) -> ReviewCycle:
    """A draft cycle with these participants and generated reviews; activated (and so with its
    notification jobs) when ``activate_as`` is given."""
    today = date.today()
    defaults = {
        "name": f"Cycle {next(_serial)}",
        "period_start": today - timedelta(days=180),
        "period_end": today,
        "due_date": today + timedelta(days=14),
    }
    cycle = create_cycle(session, tenant.id, CycleDetails(**{**defaults, **details}))
    if participants:
        change_participants(session, tenant.id, cycle.id, {e.id for e in participants}, set())
        generate_reviews(session, tenant.id, cycle.id, peers)
    if activate_as is not None:
        activate_cycle(session, tenant.id, cycle.id, activate_as.id)
    session.flush()
    session.refresh(cycle)
    return cycle


def csrf_token(client: Any, path: str) -> str:
    """The CSRF token of the client's session, read from a page as a browser would."""
    page = client.get(path).get_data(as_text=True)
    match = _TOKEN.search(page)
    assert match, f"no CSRF token on {path}"
    return match.group(1)


def login_as(client: Any, user: User, password: str = PASSWORD) -> Any:
    """Log ``user`` in through the log-in form; returns the response."""
    token = csrf_token(client, "/login")
    response = client.post(
        "/login", data={"email": user.email, "password": password, "csrf_token": token}
    )
    assert response.status_code == 302, response.get_data(as_text=True)
    return response


def post_form(client: Any, path: str, data: dict[str, Any] | None = None, *,
              token_from: str = "/my/reviews", **options: Any) -> Any:  # fmt: skip
    """POST ``data`` with the CSRF token of the client's session (read from ``token_from``)."""
    return client.post(
        path, data={**(data or {}), "csrf_token": csrf_token(client, token_from)}, **options
    )
