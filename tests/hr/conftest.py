"""Fixtures for the domain tests: a session inside the app, and a small organisation."""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy.orm import Session

from models import Employee, Tenant, User, db
from models.people import Role
from tests.support.factories import make_employees, make_tenant, make_user


@pytest.fixture
def session(app: Any) -> Iterator[Session]:
    """The app's session; tests commit what other connections must see."""
    with app.app_context():
        yield db.session()
        db.session.rollback()


@dataclass
class Org:
    tenant: Tenant
    people: list[Employee]
    admin: User


@pytest.fixture
def org(session: Session) -> Org:
    """A tenant with 12 employees (a tree of spans of 3) and an HR admin; committed."""
    tenant = make_tenant(session)
    people = make_employees(session, tenant, 12, span=3)
    admin = make_user(session, tenant, Role.HR_ADMIN, employee=people[1])
    session.commit()
    return Org(tenant, people, admin)
