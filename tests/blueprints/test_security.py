"""The headers every response carries, and pages that need nothing the policy forbids."""

import re
from typing import Any

import psycopg

from blueprints.security import CONTENT_SECURITY_POLICY
from models.people import Role
from tests.support.factories import (
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)
from tests.support.jobs import make_job
from tests.support.world import build_world

INLINE = re.compile(
    r"<script(?![^>]*\bsrc=)[^>]*>|<style\b|\sstyle=|\son[a-z]+=|javascript:", re.IGNORECASE
)


def test_every_kind_of_response_carries_the_security_headers(client: Any) -> None:
    for path in ("/login", "/healthz", "/queues/", "/static/pauta.css", "/no-such-page"):
        response = client.get(path)
        response.close()  # a static file is streamed from an open file
        headers = response.headers
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
        assert headers["X-Content-Type-Options"] == "nosniff", path
        assert headers["Referrer-Policy"] == "same-origin", path
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    for directive in ("object-src 'none'", "base-uri 'self'", "frame-ancestors 'none'"):
        assert directive in CONTENT_SECURITY_POLICY


def test_no_page_has_an_inline_script_style_or_event_handler(
    app: Any, conn: psycopg.Connection[Any]
) -> None:
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        people = make_employees(session, tenant, 6)
        hr_admin = make_user(session, tenant, Role.HR_ADMIN, employee=people[0])
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
        cycle = make_cycle(session, tenant, people, activate_as=hr_admin)
    job = make_job(conn, state="dead", error="E: <style>", payload={"x": "<script>1</script>"})
    pages = {
        hr_admin: [
            "/cycles/", f"/cycles/{cycle.id}", "/cycles/new", "/my/reviews",
            f"/cycles/{cycle.id}/participants",
        ],
        admin: [
            "/queues/", "/queues/default", "/jobs/", f"/jobs/{job}", "/failures/",
            "/scheduled/", "/workers/", "/audit/",
        ],
    }  # fmt: skip
    for user, paths in pages.items():
        client = app.test_client()
        login_as(client, user)
        for path in paths:
            response = client.get(path)
            assert response.status_code == 200, path
            assert not INLINE.findall(response.get_data(as_text=True)), path


def test_pages_are_no_store_so_nothing_stays_in_a_cache_after_logout(
    app: Any, conn: psycopg.Connection[Any]
) -> None:
    world = build_world(app, conn)
    pages = {
        Role.HR_ADMIN: ["/cycles/", f"/cycles/{world.active_id}", "/my/reviews", "/queues/"],
        Role.PLATFORM_ADMIN: [
            f"/jobs/{world.arguments['job_id'][0]}/payload", "/metrics/figures.json", "/audit/",
        ],
    }  # fmt: skip
    for role, paths in pages.items():
        client = app.test_client()
        login_as(client, world.users[role])
        for path in paths:
            response = client.get(path)
            assert response.status_code == 200, path
            assert response.headers["Cache-Control"] == "no-store", path
    anonymous = app.test_client()
    for path in ("/login", "/cycles/", "/no-such-page"):
        assert anonymous.get(path).headers["Cache-Control"] == "no-store", path
    static = anonymous.get("/static/pauta.css")
    static.close()
    assert "no-store" not in static.headers.get("Cache-Control", "")  # may be cached
