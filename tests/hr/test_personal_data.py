"""The personal-data inventory (docs/reference/personal-data.md) against the live schema, and
minimization: HR job payloads carry ids only."""

import inspect
import re
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.orm import Session

import hr.tasks
from hr.imports import start_import
from jobqueue import registry
from tests.hr.conftest import Org
from tests.support.factories import make_cycle

Conn = psycopg.Connection[Any]
INVENTORY = Path(__file__).parents[2] / "docs" / "reference" / "personal-data.md"
# Tables without a foreign key to a person that still carry personal data in their text.
TEXT_CARRIERS = ("employee_import_rows", "jobs", "job_attempts", "login_throttle")
_SECTION = re.compile(r"^## `([a-z_]+)`$")
_ROW = re.compile(r"^\| `([a-z_]+)` \|")

PEOPLE_TABLES = """
SELECT DISTINCT tc.table_name
FROM information_schema.table_constraints tc
JOIN information_schema.constraint_column_usage target
  ON target.constraint_schema = tc.constraint_schema
 AND target.constraint_name = tc.constraint_name
WHERE tc.constraint_type = 'FOREIGN KEY' AND tc.table_schema = 'public'
  AND target.table_name IN ('employees', 'users')
"""


def documented() -> set[tuple[str, str]]:
    """(table, column) for every row of the inventory's tables."""
    found: set[tuple[str, str]] = set()
    table = None
    for line in INVENTORY.read_text().splitlines():
        if section := _SECTION.match(line):
            table = section.group(1)
        elif (row := _ROW.match(line)) and table is not None:
            found.add((table, row.group(1)))
    return found


def people_columns(conn: Conn) -> set[tuple[str, str]]:
    """(table, column) for every column of a table that holds or points at personal data."""
    tables = {"employees", "users", *TEXT_CARRIERS}
    tables |= {name for (name,) in conn.execute(PEOPLE_TABLES)}
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'public' AND table_name = ANY(%s)",
        (sorted(tables),),
    )
    return {(table, column) for table, column in rows}


def test_every_column_of_a_people_table_has_an_inventory_entry_and_every_entry_exists(
    conn: Conn,
) -> None:
    live = people_columns(conn)
    listed = documented()
    assert sorted(live - listed) == [], "columns missing from docs/reference/personal-data.md"
    assert sorted(listed - live) == [], "entries of personal-data.md that name no column"


def test_a_new_column_or_a_new_table_pointing_at_people_is_caught(conn: Conn) -> None:
    conn.execute("ALTER TABLE reviews ADD COLUMN mood text")
    conn.execute(
        "CREATE TABLE badges (id bigint PRIMARY KEY, tenant_id bigint, employee_id bigint,"
        " label text, FOREIGN KEY (tenant_id, employee_id)"
        " REFERENCES employees (tenant_id, id))"
    )
    conn.execute("CREATE TABLE notes (id bigint PRIMARY KEY, author bigint REFERENCES users)")
    missing = people_columns(conn) - documented()
    assert missing == {
        ("reviews", "mood"),
        ("badges", "id"),
        ("badges", "tenant_id"),
        ("badges", "employee_id"),
        ("badges", "label"),
        ("notes", "id"),
        ("notes", "author"),
    }


def test_every_hr_task_takes_integers_only() -> None:
    """A task's payload is its keyword arguments: an HR task whose signature takes a name, an
    address or a comment would put it into jobs.payload. Ids and counts (a reminder's round)
    only; a task may take nothing at all."""
    tasks = [task for task in registry if task.name.startswith("hr.")]
    assert {task.name for task in tasks} >= {hr.tasks.NOTIFY_REVIEWER, hr.tasks.IMPORT_EMPLOYEES}
    for task in tasks:
        parameters = list(inspect.signature(task.function).parameters.values())
        if task.pass_context:
            parameters = parameters[1:]
        for parameter in parameters:
            assert parameter.annotation in (int, "int"), (task.name, parameter.name)


def test_the_payloads_hr_enqueues_are_ids_only(session: Session, org: Org, conn: Conn) -> None:
    make_cycle(session, org.tenant, org.people, peers=2, activate_as=org.admin)
    people = "name,email,department,manager_email\nZed Quux,zed@x.example,Ops,\n"
    start_import(session, org.tenant.id, "people.csv", people.encode(), org.admin)
    session.commit()
    payloads = [payload for (payload,) in conn.execute("SELECT payload FROM jobs")]
    assert len(payloads) > len(org.people)  # the notices and the import
    for payload in payloads:
        assert payload, payload
        for key, value in payload.items():
            assert key.endswith("_id") and type(value) is int, payload
