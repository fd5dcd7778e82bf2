"""Input no page can take is refused with a 400 (or a 404 for a path) that says why, before
anything is read or written: NUL characters, lone surrogates, integers beyond 64 bits, files
where a form expects text, malformed cursors and filters that cannot be applied."""

import gc
import html
import io
import json
from typing import Any

import psycopg
import pytest

from blueprints.inputs import BIGINT_MAX, accepts_files
from models.people import Role
from tests.support.db import scalar, table_digests
from tests.support.factories import PASSWORD, csrf_token, login_as
from tests.support.jobs import make_job
from tests.support.world import World, build_world

Conn = psycopg.Connection[Any]
NUL = "The {where} holds a NUL character (U+0000), which Pauta does not accept."
TOO_BIG = str(BIGINT_MAX + 1)


@pytest.fixture
def world(app: Any, conn: Conn) -> World:
    return build_world(app, conn)


def logged_in(app: Any, world: World, role: Role) -> Any:
    client = app.test_client()
    login_as(client, world.users[role])
    return client


def page(response: Any) -> str:
    """The response's text, entities decoded (error pages escape quotes)."""
    return html.unescape(response.get_data(as_text=True))


def test_a_nul_anywhere_in_a_request_is_400_saying_where_and_changes_nothing(
    app: Any, world: World, conn: Conn
) -> None:
    anonymous = app.test_client()
    token = csrf_token(anonymous, "/login")
    hr_admin = logged_in(app, world, Role.HR_ADMIN)
    hr_token = csrf_token(hr_admin, "/cycles/new")
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)
    before = table_digests(conn)

    logging_in = anonymous.post(
        "/login", data={"email": "a\x00@x.example", "password": PASSWORD, "csrf_token": token}
    )
    renaming = hr_admin.post(
        f"/cycles/{world.draft_id}/edit",
        data={"name": "Q3\x00", "period_start": "2026-01-01", "period_end": "2026-06-30",
              "due_date": "2026-07-31", "csrf_token": hr_token},
    )  # fmt: skip
    in_query = admin.get("/jobs/?queue=%00")
    in_path = admin.get("/queues/de%00fault")
    in_a_name = admin.get("/failures/?%00=1")

    assert [r.status_code for r in (logging_in, renaming, in_query, in_path, in_a_name)] == [
        400
    ] * 5
    assert NUL.format(where="form field 'email'") in page(logging_in)
    assert NUL.format(where="form field 'name'") in page(renaming)
    assert NUL.format(where="query parameter 'queue'") in page(in_query)
    assert NUL.format(where="path") in page(in_path)
    assert NUL.format(where="name of a query parameter") in page(in_a_name)
    assert table_digests(conn) == before


def test_a_json_body_is_read_as_a_form_only_when_it_is_an_object_of_clean_text(
    app: Any, world: World, conn: Conn
) -> None:
    client = app.test_client()
    token = csrf_token(client, "/login")
    before = table_digests(conn)

    def post(body: str) -> Any:
        return client.post("/login", data=body, content_type="application/json",
                           headers={"X-CSRFToken": token})  # fmt: skip

    surrogate = post(json.dumps({"email": "\ud800@x.example", "password": PASSWORD}))
    not_text = post(json.dumps({"email": ["a@x.example", 7], "password": PASSWORD}))
    not_an_object = post("[1, 2]")
    not_json = post('{"email": ')

    assert "holds a lone surrogate (U+D800 to U+DFFF" in page(surrogate)
    assert "The JSON field 'email' must be text or a list of texts." in page(not_text)
    assert "A JSON body must be an object of form fields." in page(not_an_object)
    assert "The request body is not valid JSON." in page(not_json)
    for response in (surrogate, not_text, not_an_object, not_json):
        assert response.status_code == 400
    assert table_digests(conn) == before

    user = world.users[Role.HR_ADMIN]
    good = post(json.dumps({"email": user.email, "password": PASSWORD}))
    assert good.status_code == 302  # an object of text still logs in


def test_ids_beyond_64_bits_are_404_in_paths_and_400_in_queries_and_forms(
    app: Any, world: World, conn: Conn
) -> None:
    hr_admin = logged_in(app, world, Role.HR_ADMIN)
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)
    employee = logged_in(app, world, Role.EMPLOYEE)
    fingerprint = world.arguments["fingerprint"][0]
    before = table_digests(conn)

    assert hr_admin.get(f"/cycles/{TOO_BIG}").status_code == 404
    assert hr_admin.get(f"/cycles/{'9' * 5000}/edit").status_code == 404
    assert hr_admin.get(f"/cycles/{BIGINT_MAX}").status_code == 404  # the largest id: no row
    assert employee.get(f"/my/reviews/{TOO_BIG}").status_code == 404
    assert admin.get(f"/jobs/{TOO_BIG}/payload").status_code == 404

    for path in (
        f"/my/reviews?cycle={TOO_BIG}",
        f"/jobs/?before={TOO_BIG}",
        f"/audit/?before={TOO_BIG}",
        f"/failures/{fingerprint}?before={TOO_BIG}",
        f"/failures/{fingerprint}/confirm?action=requeue&job={TOO_BIG}",
        f"/scheduled/?after=2026-01-01T00:00:00%2B00:00,{TOO_BIG}",
    ):
        client = employee if path.startswith("/my/") else admin
        response = client.get(path)
        assert response.status_code == 400, path
        assert f"must be a whole number from 0 to {BIGINT_MAX}, not '{TOO_BIG}'" in page(response)
    assert employee.get(f"/my/reviews?cycle={BIGINT_MAX}").status_code == 200
    assert admin.get(f"/jobs/?before={BIGINT_MAX}").status_code == 200

    token = csrf_token(admin, f"/failures/{fingerprint}/confirm?action=requeue")
    for data in ({"max_id": TOO_BIG}, {"max_id": "0", "jobs": TOO_BIG}):
        response = admin.post(
            f"/failures/{fingerprint}/requeue", data={**data, "csrf_token": token}
        )
        assert response.status_code == 400, data
        assert "The action was not taken" in page(response)
    assert table_digests(conn) == before


def test_a_garbled_selection_does_not_turn_into_the_whole_failure_group(
    app: Any, world: World, conn: Conn
) -> None:
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)
    fingerprint = world.arguments["fingerprint"][0]
    newest = world.arguments["job_id"][0]
    token = csrf_token(admin, f"/failures/{fingerprint}/confirm?action=requeue")
    response = admin.post(
        f"/failures/{fingerprint}/requeue",
        data={"max_id": str(newest), "jobs": "first", "csrf_token": token},
    )
    assert response.status_code == 400
    assert scalar(conn, "SELECT state FROM jobs WHERE id = %s", newest) == "dead"


def test_a_file_where_a_form_expects_text_is_400(app: Any, world: World, conn: Conn) -> None:
    client = app.test_client()
    token = csrf_token(client, "/login")
    before = table_digests(conn)
    response = client.post(
        "/login",
        data={"email": (io.BytesIO(b"a@x.example"), "e.txt"), "password": "x", "csrf_token": token},
    )
    assert response.status_code == 400
    assert "The form field 'email' takes text, not a file." in page(response)
    assert table_digests(conn) == before


def test_a_view_takes_files_only_under_the_names_it_declares(app: Any) -> None:
    @accepts_files("csv")
    def upload() -> str:
        from flask import request

        return ",".join(sorted(request.files))

    app.add_url_rule("/test-upload", view_func=upload, methods=["POST"])
    app.config["WTF_CSRF_ENABLED"] = False
    client = app.test_client()
    taken = client.post("/test-upload", data={"csv": (io.BytesIO(b"a,b"), "people.csv")})
    refused = client.post("/test-upload", data={"other": (io.BytesIO(b"a,b"), "people.csv")})
    bad_name = client.post("/test-upload", data={"csv": (io.BytesIO(b"a"), "p\x00.csv")})
    assert (taken.status_code, page(taken)) == (200, "csv")
    assert refused.status_code == 400
    assert bad_name.status_code == 400
    assert "The name of the file in 'csv' holds a NUL character" in page(bad_name)


def test_malformed_cursors_are_400_not_the_first_page(app: Any, world: World) -> None:
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)
    employee = logged_in(app, world, Role.EMPLOYEE)
    assert admin.get("/jobs/?before=abc").status_code == 400
    assert admin.get("/audit/?before=-1").status_code == 400
    assert employee.get("/my/reviews?cycle=first").status_code == 400
    later = admin.get("/scheduled/?after=yesterday")
    assert later.status_code == 400
    assert "The query parameter 'after' must be <time>,<job id>" in page(later)
    assert admin.get("/scheduled/?after=").status_code == 200  # empty: the first page


def test_filters_that_cannot_be_applied_are_named_on_the_page(
    app: Any, world: World, conn: Conn
) -> None:
    make_job(conn, "noop", state="succeeded", tenant_id=world.tenant_id)
    admin = logged_in(app, world, Role.PLATFORM_ADMIN)
    jobs = admin.get("/jobs/?state=bogus&payload=nokey")
    assert jobs.status_code == 400
    text = page(jobs)
    assert "These filters were not applied" in text
    assert "<li>State: Not a valid choice.</li>" in text
    assert "<li>Payload: Write the payload filter as key=value.</li>" in text
    assert admin.get("/jobs/?state=dead&payload=a%3D1").status_code == 200

    hr_admin = logged_in(app, world, Role.HR_ADMIN)
    participants = hr_admin.get(f"/cycles/{world.draft_id}/participants?manager=nobody")
    assert participants.status_code == 400
    assert "<li>Reports to: " in page(participants)
    assert hr_admin.get(f"/cycles/{world.draft_id}/participants?manager=0").status_code == 200


def test_a_field_over_the_form_memory_limit_is_413_and_the_files_received_are_closed(
    app: Any, world: World, conn: Conn
) -> None:
    """Werkzeug drops the files it had received unclosed: a ResourceWarning, which this suite
    turns into a failure, when they are collected."""
    client = app.test_client()
    token = csrf_token(client, "/login")
    before = table_digests(conn)
    body = (
        b'--B\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n%s\r\n'
        b'--B\r\nContent-Disposition: form-data; name="password"; filename="p.txt"\r\n\r\n'
        b"xxxx\r\n"
        b'--B\r\nContent-Disposition: form-data; name="email"\r\n\r\n%s\r\n--B--\r\n'
    ) % (token.encode(), b"a" * 1_000_000)  # raw: the test client's encoder has files of its own
    response = client.post("/login", data=body, content_type="multipart/form-data; boundary=B")
    assert response.status_code == 413
    gc.collect()
    assert table_digests(conn) == before


def test_a_form_part_whose_name_cannot_be_read_is_400(app: Any, world: World, conn: Conn) -> None:
    client = app.test_client()
    token = csrf_token(client, "/login")
    before = table_digests(conn)
    for part in (b'name="email\r\nX: y"', b'name="file\r\n"; filename="a.csv"'):
        body = (
            b'--B\r\nContent-Disposition: form-data; name="csrf_token"\r\n\r\n%s\r\n'
            b"--B\r\nContent-Disposition: form-data; %s\r\n\r\na@x.example\r\n--B--\r\n"
        ) % (token.encode(), part)
        response = client.post("/login", data=body, content_type="multipart/form-data; boundary=B")
        assert response.status_code == 400, part
    assert table_digests(conn) == before


def test_the_files_of_a_multipart_body_that_cannot_be_read_are_closed(app: Any) -> None:
    """A truncated body: Werkzeug gives up, reads no form, and drops the file it had opened
    (a ResourceWarning, a failure in this suite, when collected)."""
    client = app.test_client()
    body = (
        b'--B\r\nContent-Disposition: form-data; name="csv"; filename="a.csv"\r\n\r\nx,y\r\n'
        b'--B\r\nContent-Disposition: form-data; name="email"\r\n\r\nunfinished'
    )
    response = client.post("/login", data=body, content_type="multipart/form-data; boundary=B")
    assert response.status_code == 400  # no CSRF token could be read
    gc.collect()
