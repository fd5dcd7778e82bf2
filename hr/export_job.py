"""The export job: everything held about one person, as JSON and as a readable HTML page.

``run_export`` works on connections from the worker's pool, like the import job:

1. Lock the export's row and mark it ``running`` (a finished or failed one is left alone:
   delivery is at least once).
2. Read each section in turn, committing the progress (``sections_done``) after each, so the
   request page's progress bar moves section by section.
3. Store the JSON document and the HTML page and mark the export ``finished``; the download link
   works from then until ``expires_at``.

What it reads is :data:`REFERENCES` — one entry per foreign key to ``employees`` or ``users``
(``tests/hr/test_export.py`` fails when the schema has a foreign key that is not listed, so a
new reference to a person cannot be left out of exports) — plus the two kinds of rows that
name a person without a foreign key: their notifications (``jobs`` whose payload names them,
with every attempt) and the audit entries about them (``target_type = 'employee'``).

Worker-side code: no Flask, no models; SQL on psycopg.
"""

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from jinja2 import Environment, FileSystemLoader, select_autoescape
from psycopg.rows import dict_row

from jobqueue import PermanentError

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
TEMPLATES = Path(__file__).parent / "export_templates"


@dataclass(frozen=True, slots=True)
class Reference:
    """Rows of ``table`` whose ``column`` holds the person's employee id (``points_at``
    'employees') or one of their accounts' ids ('users')."""

    table: str
    column: str
    points_at: str
    title: str
    omit: tuple[str, ...] = ()  # secrets, and other people's data carried whole

    @property
    def key(self) -> str:
        return f"{self.table}.{self.column}"


REFERENCES = (
    Reference("users", "employee_id", "employees", "Log-in accounts",
              omit=("password_hash", "session_token")),
    Reference("employees", "manager_id", "employees", "People who report to them"),
    Reference("cycle_participants", "employee_id", "employees", "Review cycles taken part in"),
    Reference("reviews", "reviewee_id", "employees", "Reviews received"),
    Reference("reviews", "reviewer_id", "employees", "Reviews written"),
    Reference("review_notice_starts", "reviewer_id", "employees", "Notices begun"),
    Reference("data_exports", "employee_id", "employees", "Exports of their data",
              omit=("content_json", "content_html", "token")),
    Reference("review_cycles", "activated_by", "users", "Cycles they activated"),
    Reference("employee_imports", "created_by", "users", "Employee imports they ran",
              omit=("content",)),
    Reference("audit_log", "user_id", "users", "Actions they took (audit log)"),
    Reference("data_exports", "requested_by", "users", "Exports they asked for",
              omit=("content_json", "content_html", "token")),
)  # fmt: skip
SECTIONS = len(REFERENCES) + 3  # the profile, the notifications, the audit entries about them

BEGIN = """
UPDATE data_exports SET state = 'running', started_at = coalesce(started_at, now()),
       sections_done = 0
WHERE id = %(export_id)s AND tenant_id = %(tenant_id)s AND state IN ('queued', 'running')
RETURNING employee_id
"""
PROGRESS = """
UPDATE data_exports SET sections_done = sections_done + 1
WHERE id = %(export_id)s AND tenant_id = %(tenant_id)s AND state = 'running'
"""
FINISH = """
UPDATE data_exports SET state = 'finished', finished_at = now(), content_json = %(json)s,
       content_html = %(html)s
WHERE id = %(export_id)s AND tenant_id = %(tenant_id)s AND state = 'running'
"""
FAIL = """
UPDATE data_exports SET state = 'failed', finished_at = now(), error = %(error)s
WHERE id = %(export_id)s AND tenant_id = %(tenant_id)s AND state IN ('queued', 'running')
"""
PROFILE = """
SELECT e.id, e.name, e.email, e.department, e.created_at, m.id AS manager_id,
       m.name AS manager_name
FROM employees e LEFT JOIN employees m ON m.tenant_id = e.tenant_id AND m.id = e.manager_id
WHERE e.tenant_id = %(tenant_id)s AND e.id = %(employee_id)s
"""
ACCOUNTS = "SELECT id FROM users WHERE tenant_id = %(tenant_id)s AND employee_id = %(employee_id)s"
ROWS = """
SELECT to_jsonb(t) - %(omit)s::text[] AS row FROM {table} t
WHERE t.{column} = ANY(%(ids)s) {tenant} ORDER BY t::text
"""
NOTIFICATIONS = """
SELECT j.id, j.task, j.state, j.attempt, j.created_at, j.finished_at, j.last_error,
       coalesce((SELECT jsonb_agg(jsonb_build_object('attempt', a.attempt,
                 'started_at', a.started_at, 'finished_at', a.finished_at,
                 'outcome', a.outcome, 'error', a.error) ORDER BY a.attempt)
                 FROM job_attempts a WHERE a.job_id = j.id), '[]') AS attempts,
       c.name AS cycle_name
FROM jobs j LEFT JOIN review_cycles c
  ON c.tenant_id = j.tenant_id AND c.id::text = j.payload->>'cycle_id'
WHERE j.tenant_id = %(tenant_id)s AND j.task = 'hr.notify_reviewer'
  AND j.payload->>'reviewer_id' = %(employee_text)s
ORDER BY j.id
"""
ABOUT = """
SELECT a.id, a.at, a.action, a.details, u.name AS by_name, u.role AS by_role
FROM audit_log a LEFT JOIN users u ON u.id = a.user_id
WHERE a.tenant_id = %(tenant_id)s AND a.target_type = 'employee'
  AND a.target_id = %(employee_text)s
ORDER BY a.id
"""


def run_export(connect: Connect, tenant_id: int, export_id: int) -> None:
    """Build export ``export_id`` of ``tenant_id``; raises PermanentError if there is none."""
    key = {"tenant_id": tenant_id, "export_id": export_id}
    with connect() as connection:
        begun = connection.execute(BEGIN, key).fetchone()
        if begun is None:
            found = connection.execute(
                "SELECT 1 FROM data_exports WHERE id = %(export_id)s AND tenant_id = %(tenant_id)s",
                key,
            ).fetchone()
            if found is None:
                raise PermanentError(f"there is no data export {export_id} for this tenant")
            return  # finished or failed already: a duplicate delivery
        connection.commit()
        document = collect(connection, tenant_id, begun[0], lambda: _step(connection, key))
        connection.execute(
            FINISH,
            {**key, "json": psycopg.types.json.Jsonb(document), "html": render_html(document)},
        )


def fail_export(connect: Connect, tenant_id: int, export_id: int, error: str) -> None:
    with connect() as connection:
        connection.execute(FAIL, {"tenant_id": tenant_id, "export_id": export_id, "error": error})


def _step(connection: psycopg.Connection[Any], key: dict[str, int]) -> None:
    connection.execute(PROGRESS, key)
    connection.commit()


def collect(
    connection: psycopg.Connection[Any], tenant_id: int, employee_id: int,
    step: Callable[[], None] = lambda: None,
) -> dict[str, Any]:  # fmt: skip
    """Every row about the employee, section by section (``step`` after each)."""
    person = {"tenant_id": tenant_id, "employee_id": employee_id,
              "employee_text": str(employee_id)}  # fmt: skip
    with connection.cursor(row_factory=dict_row) as cursor:
        profile = cursor.execute(PROFILE, person).fetchone()
        accounts = [row["id"] for row in cursor.execute(ACCOUNTS, person)]
        step()
        references = {}
        for reference in REFERENCES:
            ids = [employee_id] if reference.points_at == "employees" else accounts
            references[reference.key] = _rows(cursor, reference, ids, tenant_id)
            step()
        notifications = cursor.execute(NOTIFICATIONS, person).fetchall()
        step()
        about = cursor.execute(ABOUT, person).fetchall()
        step()
    return json.loads(
        json.dumps(
            {
                "format": "pauta-personal-data/1",
                "employee_id": employee_id,
                "profile": profile,
                "accounts": accounts,
                "references": references,
                "notifications": notifications,
                "audit_about_them": about,
            },
            default=str,
        )
    )


def _rows(cursor: Any, reference: Reference, ids: list[int], tenant_id: int) -> list[Any]:
    if not ids:
        return []
    # The table and column names come from REFERENCES, never from input.
    tenant = "" if reference.table == "audit_log" else "AND t.tenant_id = %(tenant_id)s"
    query = ROWS.format(table=reference.table, column=reference.column, tenant=tenant)
    params = {"ids": ids, "omit": list(reference.omit), "tenant_id": tenant_id}
    return [row["row"] for row in cursor.execute(query, params)]


def render_html(document: dict[str, Any]) -> str:
    """The readable page of an export: what a person can read without tools."""
    environment = Environment(
        loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True)
    )
    template = environment.get_template("export.html")
    titles = {reference.key: reference.title for reference in REFERENCES}
    return template.render(document=document, titles=titles)
