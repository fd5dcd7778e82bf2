"""The employee import pages as an HR admin uses them, CSRF on; the job is run in-process here
(tests/test_hr_browser.py runs it with a real worker)."""

import csv
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from werkzeug.datastructures import FileStorage
from werkzeug.test import encode_multipart

from hr.import_job import run_import
from models.people import Role
from tests.support.db import scalar
from tests.support.factories import csrf_token, login_as, make_tenant, make_user, seeding

Conn = psycopg.Connection[Any]
HEADER = b"name,email,department,manager_email\n"
PAGE = "/people/imports/"


@pytest.fixture
def admin(app: Any) -> Any:
    with seeding(app) as session:
        return make_user(session, make_tenant(session, "acme"), Role.HR_ADMIN)


@pytest.fixture
def client(app: Any, admin: Any) -> Any:
    client = app.test_client()
    login_as(client, admin)
    return client


def upload(client: Any, content: bytes, filename: str = "people.csv") -> Any:
    """POST the file as a browser's form does. The body is built in memory: the test client
    would spool a large one to a temporary file, and leave it open when the app answers 413
    without reading it."""
    file = FileStorage(io.BytesIO(content), filename)
    boundary, body = encode_multipart({"csrf_token": csrf_token(client, PAGE), "file": file})
    return client.post(PAGE, data=body, content_type=f"multipart/form-data; boundary={boundary}")


def run_stored_import(database_url: str, tenant_id: int, import_id: int) -> None:
    @contextmanager
    def connection() -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(database_url) as borrowed:
            yield borrowed

    run_import(connection, tenant_id, import_id)


def test_the_upload_stores_the_file_and_enqueues_its_job_and_nothing_more(
    client: Any, admin: Any, conn: Conn
) -> None:
    content = HEADER + b"Ana,ana@acme.example,Sales,\nBo,bo@acme.example,Sales,ana@acme.example\n"
    response = upload(client, content)
    import_id = scalar(conn, "SELECT id FROM employee_imports")
    assert (response.status_code, response.headers["Location"]) == (303, f"{PAGE}{import_id}")
    stored = conn.execute(
        "SELECT tenant_id, created_by, filename, content, state, total_rows, job_id"
        " FROM employee_imports"
    ).fetchone()
    job = conn.execute("SELECT id, tenant_id, task, queue, payload FROM jobs").fetchone()
    assert stored == (admin.tenant_id, admin.id, "people.csv", content.decode(), "queued", 2,
                      job[0])  # type: ignore[index]  # fmt: skip
    assert job[1:] == (admin.tenant_id, "hr.import_employees", "default", {"import_id": import_id})  # type: ignore[index]
    assert scalar(conn, "SELECT count(*) FROM employees") == 0  # the job does the work
    entry = conn.execute("SELECT action, target_type, target_id, tenant_id, details"
                         " FROM audit_log").fetchone()  # fmt: skip
    assert entry == ("employees.import", "employee_import", str(import_id), admin.tenant_id,
                     {"file": "people.csv", "rows": 2})  # fmt: skip

    audit = client.get("/audit/").get_data(as_text=True)
    assert f'<a href="{PAGE}{import_id}">employee import #{import_id}</a>' in audit

    page = client.get(f"{PAGE}{import_id}").get_data(as_text=True)
    assert '<progress max="2" value="0" aria-label="Rows processed">' in page
    assert f'data-refresh-url="{PAGE}{import_id}/progress"' in page
    assert "Waiting for a worker serving the <code>default</code> queue." in page


@pytest.mark.parametrize(
    ("content", "filename", "message"),
    [
        (HEADER + b"Ana,ana@acme.example,Sales,\n", "people.xlsx",
         "Choose a .csv file (comma-separated values, UTF-8)."),
        (HEADER + "Zoë,zoe@acme.example,Sales,\n".encode("latin-1"), "people.csv",
         "people.csv cannot be imported: the file is not UTF-8 text (byte 39 is not UTF-8)"),
        (b"name;email;department\nAna;ana@acme.example;Sales\n", "people.csv",
         "people.csv cannot be imported: the first line must name the columns name, email,"
         " department, manager_email (in any order); it names name;email;department."),
        (HEADER + b"x" * (11 * 1024 * 1024), "people.csv",
         "The file is larger than 10 MiB: split it in parts."),
    ],
)  # fmt: skip
def test_a_file_that_cannot_be_imported_is_refused_with_a_clear_message(
    client: Any, conn: Conn, content: bytes, filename: str, message: str
) -> None:
    response = upload(client, content, filename)
    if response.status_code == 303:
        assert response.headers["Location"] == PAGE
        response = client.get(PAGE)
    assert message in response.get_data(as_text=True).replace("&#34;", '"')
    assert scalar(conn, "SELECT count(*) FROM employee_imports") == 0
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


def test_a_second_import_is_refused_while_the_first_is_under_way(client: Any, conn: Conn) -> None:
    upload(client, HEADER + b"Ana,ana@acme.example,Sales,\n")
    first = scalar(conn, "SELECT id FROM employee_imports")
    again = upload(client, HEADER + b"Bo,bo@acme.example,Sales,\n")
    assert (again.status_code, again.headers["Location"]) == (303, PAGE)
    page = client.get(PAGE).get_data(as_text=True)
    assert f"Import {first} (people.csv) is queued: one import at a time." in page
    assert scalar(conn, "SELECT count(*) FROM employee_imports") == 1


def test_the_report_lists_each_refusal_and_downloads_as_csv_without_formulas(
    client: Any, admin: Any, conn: Conn, database_url: str
) -> None:
    content = HEADER + (
        b"Ana,ana@acme.example,Sales,\n"
        b'=HYPERLINK("http://x"),bad,Sales,\n'
        b"Bo,bo@acme.example,Sales,nobody@acme.example\n"
    )
    upload(client, content)
    import_id = scalar(conn, "SELECT id FROM employee_imports")
    run_stored_import(database_url, admin.tenant_id, import_id)

    page = client.get(f"{PAGE}{import_id}").get_data(as_text=True)
    assert "data-refresh-url" not in page and "<progress" not in page
    refused = re.findall(r'<tr><td class="num">(\d+)</td><td>([^<]*)</td><td>[^<]*</td>'
                         r"<td>([^<]*)</td></tr>", page)  # fmt: skip
    assert refused == [
        ("3", "bad", "&#39;bad&#39; is not a valid e-mail address: An email address must have"
                     " an @-sign."),
        ("4", "bo@acme.example", "the manager nobody@acme.example is neither an employee nor"
                                 " in the file"),
    ]  # fmt: skip
    report = client.get(f"{PAGE}{import_id}/report.csv")
    assert report.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(report.get_data(as_text=True))))
    assert rows[0] == ["line", "email", "name", "outcome", "note"]
    assert ["2", "ana@acme.example", "Ana", "created", ""] in rows
    assert rows[2][2] == '\'=HYPERLINK("http://x")'  # text for a spreadsheet, not a formula
