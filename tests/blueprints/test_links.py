"""Links and redirects back to a page carry only the query parameters its view reads: keys such
as ``cycle_id``, ``endpoint``, ``_method``, ``_external`` and ``_scheme`` in the query string
neither break a page nor, with a forged ``Host`` header, send anyone to another site."""

import re
from typing import Any

import psycopg
import pytest

from models.people import Role
from tests.support.db import scalar
from tests.support.factories import csrf_token, login_as
from tests.support.jobs import make_job
from tests.support.world import World, build_world

Conn = psycopg.Connection[Any]
HOSTILE_KEYS = "endpoint=x&_method=POST&_external=1&_scheme=https&_anchor=top&cycle_id=1"
PAGER = re.compile(r'<p class="pager"><a class="button secondary" href="([^"]+)"')


@pytest.fixture
def world(app: Any, conn: Conn) -> World:
    return build_world(app, conn)


def logged_in(app: Any, world: World, role: Role) -> Any:
    client = app.test_client()
    login_as(client, world.users[role])
    return client


def forged(client: Any) -> dict[str, str]:
    """Headers of a request under a forged ``Host``, with the client's session cookie as it is
    now (as a proxy that passes the client's ``Host`` header on would deliver it)."""
    client.set_cookie("session", client.get_cookie("session").value, domain="forged.example")
    return {"Host": "forged.example"}


def participants(conn: Conn, cycle_id: int) -> set[int]:
    rows = conn.execute(
        "SELECT employee_id FROM cycle_participants WHERE cycle_id = %s", (cycle_id,)
    )
    return {employee for (employee,) in rows}


@pytest.mark.parametrize("extra", ["cycle_id=1", "_external=1&_scheme=https", HOSTILE_KEYS])
def test_saving_participants_under_hostile_query_keys_saves_once_and_comes_back_here(
    app: Any, world: World, conn: Conn, extra: str
) -> None:
    client = logged_in(app, world, Role.HR_ADMIN)
    manager = scalar(
        conn, "SELECT min(manager_id) FROM employees WHERE tenant_id = %s", world.tenant_id
    )
    path = f"/cycles/{world.draft_id}/participants"
    page = client.get(f"{path}?manager={manager}").get_data(as_text=True)
    shown = re.search(r'name="shown" type="hidden" value="([\d,]+)"', page)
    assert shown is not None
    offered = {int(value) for value in shown.group(1).split(",")}
    draft, active = participants(conn, world.draft_id), participants(conn, world.active_id)
    assert not offered <= draft  # the button has something to add

    token = csrf_token(client, path)
    response = client.post(
        f"{path}?manager={manager}&{extra}",
        headers=forged(client),
        data={"add_all": "Add everyone shown", "shown": shown.group(1), "csrf_token": token},
    )

    assert response.status_code == 302
    assert response.headers["Location"] == f"{path}?manager={manager}"
    assert participants(conn, world.draft_id) == draft | offered
    assert participants(conn, world.active_id) == active


def test_a_list_under_hostile_query_keys_pages_on_with_its_own_filters_on_this_site(
    app: Any, world: World, conn: Conn
) -> None:
    for _ in range(51):  # one more than a page: the list shows its "Older jobs" link
        make_job(conn, "noop", state="succeeded", tenant_id=world.tenant_id)
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)

    listing = admin.get(f"/jobs/?state=succeeded&{HOSTILE_KEYS}", headers=forged(admin))

    text = listing.get_data(as_text=True)
    assert listing.status_code == 200
    older = PAGER.search(text)
    assert older is not None
    assert re.fullmatch(r"/jobs/\?state=succeeded&amp;before=\d+", older.group(1))
    assert "forged.example" not in text
    assert 'name="endpoint"' not in text and 'name="_external"' not in text  # tenant form


@pytest.mark.parametrize("key", ["endpoint=x", "_method=POST", "_external=1&_scheme=https"])
def test_each_hostile_key_leaves_every_paged_list_working(
    app: Any, world: World, conn: Conn, key: str
) -> None:
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)
    for _ in range(101):  # past a page of every list: jobs, failures, scheduled, audit log
        make_job(conn, "noop", state="dead", tenant_id=world.tenant_id, error="E: same")
        make_job(conn, "noop", tenant_id=world.tenant_id, delay=3600)
    conn.execute(
        "INSERT INTO audit_log (user_id, action, target_type, target_id)"
        " SELECT %s, 'queue.pause', 'queue', 'default' FROM generate_series(1, 51)",
        (world.users[Role.PLATFORM_ADMIN].id,),
    )
    fingerprint = scalar(conn, "SELECT md5('noop' || E'\\n' || job_error_pattern('E: same'))")
    for path in ("/jobs/", "/audit/", "/scheduled/", f"/failures/{fingerprint}"):
        response = admin.get(f"{path}?{key}", headers=forged(admin))
        text = response.get_data(as_text=True)
        assert response.status_code == 200, path
        pager = PAGER.search(text)
        assert pager is not None and pager.group(1).startswith(f"{path}?"), path
        assert "forged.example" not in text, path
