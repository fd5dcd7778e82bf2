"""Every route of the console (the queues and metrics blueprints) against every kind of visitor.

The routes are listed from ``app.url_map``: a route with no line in ``EXPECTED`` fails the suite,
and the roles each view admits are held against the table in docs/reference/roles.md.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from models.people import Role
from tests.support.db import scalar
from tests.support.factories import (
    csrf_token,
    login_as,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)
from tests.support.jobs import make_job, register_worker

Conn = psycopg.Connection[Any]
ROLES_DOC = Path(__file__).resolve().parents[2] / "docs" / "reference" / "roles.md"
BLUEPRINTS = ("queues", "metrics")
READERS = frozenset({Role.HR_ADMIN, Role.PLATFORM_ADMIN})
OPERATORS = frozenset({Role.PLATFORM_ADMIN})
ANYONE = frozenset(Role)


@dataclass(frozen=True)
class Expect:
    roles: frozenset[str]  # who gets 200 (GET) or 303 (POST); others 403, anonymous 302
    query: str = ""  # appended to the URL
    tenant_bound: bool = False  # names a row of a tenant: another tenant's admin gets 404
    public: bool = False  # no log-in needed: a redirect for everyone


EXPECTED: dict[str, Expect] = {
    "queues.index": Expect(ANYONE, public=True),
    "queues.queue_overview": Expect(READERS),
    "queues.queue_detail": Expect(READERS, "?window=6h"),
    "queues.queue_pause": Expect(OPERATORS),
    "queues.queue_resume": Expect(OPERATORS),
    "queues.queue_rate_limit": Expect(OPERATORS),
    "queues.job_list": Expect(READERS, "?state=dead&queue=default"),
    "queues.job_detail": Expect(READERS, tenant_bound=True),
    "queues.job_payload": Expect(READERS, tenant_bound=True),
    "queues.job_requeue": Expect(OPERATORS),
    "queues.job_cancel": Expect(OPERATORS),
    "queues.job_run_now": Expect(OPERATORS),
    "queues.job_discard": Expect(OPERATORS),
    "queues.failure_list": Expect(READERS),
    "queues.failure_detail": Expect(READERS, tenant_bound=True),
    "queues.failure_confirm": Expect(OPERATORS, "?action=requeue"),
    "queues.failure_requeue": Expect(OPERATORS),
    "queues.failure_discard": Expect(OPERATORS),
    "queues.scheduled_list": Expect(READERS),
    "queues.worker_list": Expect(OPERATORS),
    "queues.worker_drain": Expect(OPERATORS),
    "queues.worker_drain_all": Expect(OPERATORS),
    "queues.audit_list": Expect(READERS),
    "metrics.figures_json": Expect(READERS, "?queue=default"),
    "metrics.series_json": Expect(READERS, "?queue=default&window=24h"),
}


@dataclass
class World:
    users: dict[str, Any]  # one per role in "our" tenant (platform admin: system)
    their_admin: Any  # an HR admin of another tenant
    ours: dict[str, Any] = field(default_factory=dict)  # URL arguments naming our rows


@pytest.fixture
def world(app: Any, conn: Conn) -> World:
    with seeding(app) as session:
        ours, theirs = make_tenant(session, "ours"), make_tenant(session, "theirs")
        users = {role: make_user(session, ours, role) for role in Role if role != "platform_admin"}
        users[Role.PLATFORM_ADMIN] = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
        their_admin = make_user(session, theirs, Role.HR_ADMIN)
        our_tenant, their_tenant = ours.id, theirs.id
    dead = make_job(conn, "noop", state="dead", tenant_id=our_tenant, error="ValueError: bad 1")
    make_job(conn, "noop", state="dead", tenant_id=their_tenant, error="KeyError: theirs")
    make_job(conn, "noop", tenant_id=our_tenant, delay=3600)
    fingerprint = scalar(
        conn, "SELECT md5(task || E'\\n' || job_error_pattern(last_error)) FROM jobs WHERE id = %s",
        dead,
    )  # fmt: skip
    worker = register_worker(conn)
    arguments = {"job_id": dead, "name": "default", "fingerprint": fingerprint, "worker_id": worker}
    return World(users, their_admin, arguments)


def routes(app: Any) -> list[tuple[str, str, str]]:
    """(endpoint, method, rule) for every GET and POST of the console's blueprints."""
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.split(".")[0] in BLUEPRINTS:
            for method in sorted(rule.methods & {"GET", "POST"}):
                found.append((rule.endpoint, method, rule.rule))
    return found


def url(rule: str, arguments: dict[str, Any], endpoint: str) -> str:
    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(arguments[m.group(1)]), rule)
    return path + EXPECTED[endpoint].query


def request(client: Any, method: str, path: str, token: str | None) -> Any:
    if method == "GET":
        return client.get(path)
    # max_id: the newest job a bulk action's confirmation counted (0: none), which it must post;
    # confirmed: the answer to the confirmation step every such action asks first
    data = {"csrf_token": token, "max_id": "0", "confirmed": "1"}
    return client.post(path, data=data if token else {})


def logged_in(app: Any, user: Any) -> tuple[Any, str]:
    client = app.test_client()
    login_as(client, user)
    return client, csrf_token(client, "/my/reviews")  # the log-out form carries one


def documented_roles() -> dict[str, frozenset[str]]:
    table = {}
    for line in ROLES_DOC.read_text().splitlines():
        match = re.match(r"\| `((?:queues|metrics)\.\w+)` \| [^|]+ \|(.*)\|$", line)
        if match and not EXPECTED.get(match.group(1), Expect(ANYONE)).public:
            cells = [cell.strip() for cell in match.group(2).split("|")]
            ticked = [role for role, cell in zip(("employee", "hr_staff", "hr_admin",
                      "platform_admin"), cells, strict=True) if cell == "✓"]  # fmt: skip
            table[match.group(1)] = frozenset(ticked)
    return table


def test_every_console_route_has_an_expectation(app: Any) -> None:
    assert {endpoint for endpoint, _, _ in routes(app)} == set(EXPECTED)


def test_every_view_admits_exactly_the_roles_of_the_documented_table(app: Any) -> None:
    in_code = {
        endpoint: frozenset(getattr(app.view_functions[endpoint], "allowed_roles", ANYONE))
        for endpoint, _, _ in routes(app)
    }
    assert in_code == {endpoint: expect.roles for endpoint, expect in EXPECTED.items()}
    private = {
        endpoint: roles for endpoint, roles in in_code.items() if not EXPECTED[endpoint].public
    }
    assert documented_roles() == private


def test_anonymous_visitors_are_sent_to_the_login_page(app: Any, world: World) -> None:
    client = app.test_client()
    token = csrf_token(client, "/login")
    for endpoint, method, rule in routes(app):
        response = request(client, method, url(rule, world.ours, endpoint), token)
        assert response.status_code == 302, (endpoint, method)
        assert response.headers["Location"].startswith("/login"), (endpoint, method)


@pytest.mark.parametrize("role", list(Role))
def test_each_role_gets_what_the_table_says(app: Any, world: World, conn: Conn, role: Role) -> None:
    client, token = logged_in(app, world.users[role])
    for endpoint, method, rule in routes(app):
        expect = EXPECTED[endpoint]
        response = request(client, method, url(rule, world.ours, endpoint), token)
        if expect.public:
            assert response.status_code == 302, (role, endpoint)
        elif role not in expect.roles:
            assert response.status_code == 403, (role, endpoint, method)
            assert "Not allowed" in response.get_data(as_text=True)
        else:
            wanted = 200 if method == "GET" else 303
            assert response.status_code == wanted, (role, endpoint, method)
    audit_rows = scalar(conn, "SELECT count(*) FROM audit_log")
    assert audit_rows > 0 if role == Role.PLATFORM_ADMIN else audit_rows == 0


def test_another_tenants_admin_gets_404_for_our_rows_and_sees_none_of_them(
    app: Any, world: World
) -> None:
    client, token = logged_in(app, world.their_admin)
    checked = 0
    for endpoint, method, rule in routes(app):
        expect = EXPECTED[endpoint]
        if Role.HR_ADMIN not in expect.roles or expect.public:
            continue
        response = request(client, method, url(rule, world.ours, endpoint), token)
        if expect.tenant_bound:
            assert response.status_code == 404, endpoint
            checked += 1
        else:
            assert response.status_code == 200, endpoint
            assert f"#{world.ours['job_id']}<" not in response.get_data(as_text=True), endpoint
    assert checked == 3
    figures = client.get("/metrics/figures.json?tenant=ours").get_json()
    assert figures["tenant"] == "theirs"  # an HR admin cannot ask for another tenant
    assert (
        figures["totals"]["values"]["dead"] == 1 and figures["totals"]["values"]["scheduled"] == 0
    )


def state(conn: Conn) -> tuple[Any, ...]:
    """Everything a console POST could change."""
    return tuple(
        scalar(
            conn,
            f"SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM {table} t",
        )
        for table in ("jobs", "queues", "workers", "audit_log")
    )


def test_a_post_without_csrf_token_is_400_and_changes_nothing(
    app: Any, world: World, conn: Conn
) -> None:
    client, _ = logged_in(app, world.users[Role.PLATFORM_ADMIN])
    before = state(conn)
    posts = [(endpoint, rule) for endpoint, method, rule in routes(app) if method == "POST"]
    assert len(posts) == 11
    for endpoint, rule in posts:
        response = client.post(url(rule, world.ours, endpoint), data={"max_id": 999999})
        assert response.status_code == 400, endpoint
        assert "The CSRF token is missing." in response.get_data(as_text=True)
    assert state(conn) == before
