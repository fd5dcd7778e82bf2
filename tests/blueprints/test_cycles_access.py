"""Every route of the cycles, people and auth blueprints against every kind of visitor.

The matrix is built from ``app.url_map``, so a new route is covered the day it is added; the
roles each view admits are held against the table in docs/reference/roles.md.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import select

from hr.exports import start_export
from hr.imports import start_import
from models import Employee, Tenant
from models.people import Role
from tests.support.db import scalar
from tests.support.factories import (
    csrf_token,
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)

Conn = psycopg.Connection[Any]
ROLES_DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "roles.md"
PUBLIC = {"auth.login"}
BLUEPRINTS = ("cycles", "people", "auth")
EMPLOYEE_FILE = b"name,email,department,manager_email\nAna,ana@x.example,Sales,\n"


@dataclass
class World:
    users: dict[Role, Any]  # one user per role, in "our" tenant (platform admin: system)
    ours: dict[str, int]  # URL arguments naming rows of our tenant
    theirs: dict[str, int]  # URL arguments naming rows of another tenant


@pytest.fixture
def world(app: Any, conn: Conn) -> World:
    with seeding(app) as session:
        ours, theirs = make_tenant(session, "ours"), make_tenant(session, "theirs")
        our_people = make_employees(session, ours, 6)
        their_people = make_employees(session, theirs, 6)
        users = {
            role: make_user(session, ours, role, employee=our_people[index])
            for index, role in enumerate((Role.EMPLOYEE, Role.HR_STAFF, Role.HR_ADMIN))
        }
        users[Role.PLATFORM_ADMIN] = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
        their_admin = make_user(session, theirs, Role.HR_ADMIN)
        our_cycle = make_cycle(session, ours, our_people, activate_as=users[Role.HR_ADMIN])
        their_cycle = make_cycle(session, theirs, their_people, activate_as=their_admin)
        imports = [start_import(session, tenant.id, "people.csv", EMPLOYEE_FILE, None).id
                   for tenant in (ours, theirs)]  # fmt: skip
        exports = [start_export(session, people[0], None).id
                   for people in (our_people, their_people)]  # fmt: skip

    def ids(cycle_id: int, import_id: int, export_id: int, reviewer: int | None = None
            ) -> dict[str, int]:  # fmt: skip
        """A cycle, one of its reviews (written by ``reviewer`` if given), one of its jobs, and
        an employee import of the same tenant."""
        review = scalar(
            conn,
            "SELECT min(id) FROM reviews"
            " WHERE cycle_id = %s AND reviewer_id = coalesce(%s, reviewer_id)",
            cycle_id,
            reviewer,
        )
        job = scalar(
            conn, "SELECT min(id) FROM jobs WHERE payload->>'cycle_id' = %s", str(cycle_id)
        )
        employee = scalar(
            conn, "SELECT min(reviewee_id) FROM reviews WHERE cycle_id = %s", cycle_id
        )
        return {
            "cycle_id": cycle_id,
            "review_id": review,
            "job_id": job,
            "import_id": import_id,
            "employee_id": employee,
            "export_id": export_id,
        }

    return World(
        users,
        ids(our_cycle.id, imports[0], exports[0], users[Role.EMPLOYEE].employee_id),
        ids(their_cycle.id, imports[1], exports[1]),
    )


def routes(app: Any) -> list[tuple[str, str, str]]:
    """(endpoint, method, rule) for every GET and POST of the cycles, people and auth
    blueprints."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] in BLUEPRINTS and rule.endpoint not in PUBLIC:
            for method in sorted(rule.methods & {"GET", "POST"}):
                found.append((rule.endpoint, method, rule.rule))
    return found


def url(rule: str, arguments: dict[str, int]) -> str:
    return re.sub(r"<int:(\w+)>", lambda m: str(arguments[m.group(1)]), rule)


def request(client: Any, method: str, path: str, token: str | None) -> Any:
    if method == "GET":
        return client.get(path)
    return client.post(path, data={"csrf_token": token} if token else {})


def documented_roles() -> dict[str, frozenset[str]]:
    table = {}
    for line in ROLES_DOC.read_text().splitlines():
        match = re.match(r"\| `((?:cycles|people|auth)\.\w+)` \| [^|]+ \|(.*)\|$", line)
        if match and match.group(1) not in PUBLIC:
            cells = [cell.strip() for cell in match.group(2).split("|")]
            ticked = [role for role, cell in zip(("employee", "hr_staff", "hr_admin",
                      "platform_admin"), cells, strict=True) if cell == "✓"]  # fmt: skip
            table[match.group(1)] = frozenset(ticked)
    return table


def test_every_view_admits_exactly_the_roles_of_the_documented_table(app: Any) -> None:
    in_code = {
        endpoint: frozenset(app.view_functions[endpoint].allowed_roles)
        for endpoint, _, _ in routes(app)
    }
    assert in_code == documented_roles()


def test_anonymous_visitors_are_sent_to_the_login_page(app: Any, world: World) -> None:
    client = app.test_client()
    token = csrf_token(client, "/login")
    for endpoint, method, rule in routes(app):
        path = url(rule, world.ours)
        response = request(client, method, path, token)
        assert response.status_code == 302, (endpoint, method)
        assert response.headers["Location"].startswith("/login?next="), (endpoint, method)


def test_roles_without_the_right_get_403(app: Any, world: World) -> None:
    for role, user in world.users.items():
        client = app.test_client()
        login_as(client, user)
        token = csrf_token(client, "/my/reviews")
        for endpoint, method, rule in routes(app):
            if role in app.view_functions[endpoint].allowed_roles:
                continue
            response = request(client, method, url(rule, world.ours), token)
            assert response.status_code == 403, (role, endpoint, method)
            assert "Not allowed" in response.get_data(as_text=True)


def test_another_tenants_rows_are_404_for_every_tenant_bound_role(
    app: Any, world: World, conn: Conn
) -> None:
    before = scalar(conn, "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM reviews r")
    checked = 0
    for role in (Role.EMPLOYEE, Role.HR_STAFF, Role.HR_ADMIN):
        client = app.test_client()
        login_as(client, world.users[role])
        token = csrf_token(client, "/my/reviews")
        for endpoint, method, rule in routes(app):
            if "<" not in rule or role not in app.view_functions[endpoint].allowed_roles:
                continue
            response = request(client, method, url(rule, world.theirs), token)
            assert response.status_code == 404, (role, endpoint, method)
            checked += 1
    assert checked > 20
    assert scalar(conn, "SELECT md5(string_agg(r::text, ',' ORDER BY id)) FROM reviews r") == before
    assert scalar(conn, "SELECT count(*) FROM review_cycles WHERE status = 'active'") == 2


def test_lists_show_only_the_users_tenant_but_platform_admins_see_all(
    app: Any, world: World
) -> None:
    client = app.test_client()
    login_as(client, world.users[Role.HR_STAFF])
    page = client.get("/cycles/").get_data(as_text=True)
    assert f'href="/cycles/{world.ours["cycle_id"]}"' in page
    assert f'href="/cycles/{world.theirs["cycle_id"]}"' not in page

    admin = app.test_client()
    login_as(admin, world.users[Role.PLATFORM_ADMIN])
    page = admin.get("/cycles/").get_data(as_text=True)
    assert "Ours Ltd" in page and "Theirs Ltd" in page
    detail = admin.get(f"/cycles/{world.theirs['cycle_id']}")
    assert detail.status_code == 200
    assert "Activate" not in detail.get_data(as_text=True)  # read-only for platform admins


def state(conn: Conn) -> tuple[Any, ...]:
    """Everything a POST could change."""
    return tuple(
        scalar(
            conn,
            f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM {table} t",
        )
        for table in (
            "review_cycles",
            "reviews",
            "cycle_participants",
            "jobs",
            "users",
            "employees",
            "employee_imports",
            "data_exports",
            "audit_log",
        )
    )


def test_a_post_without_csrf_token_is_400_and_changes_nothing(
    app: Any, world: World, conn: Conn
) -> None:
    with seeding(app) as session:  # a draft too, so that every action has something to change
        tenant = session.scalars(select(Tenant).where(Tenant.slug == "ours")).one()
        people = session.scalars(select(Employee).where(Employee.tenant_id == tenant.id)).all()
        draft = make_cycle(session, tenant, list(people))
    arguments = {**world.ours, "cycle_id": draft.id}
    client = app.test_client()
    login_as(client, world.users[Role.HR_ADMIN])
    before = state(conn)
    posts = [(endpoint, rule) for endpoint, method, rule in routes(app) if method == "POST"]
    assert len(posts) >= 9
    for endpoint, rule in posts:
        response = client.post(url(rule, arguments), data={"name": "changed", "peers": "1"})
        assert response.status_code == 400, endpoint
        assert "The CSRF token is missing." in response.get_data(as_text=True)
    assert state(conn) == before
    assert client.get("/cycles/").status_code == 200  # still logged in: logout was refused too
