"""The import job: applies a stored employee file, one committed batch at a time.

``run_import`` works on connections from the worker's pool (``JobContext.connection``):

1. Lock the import's row and mark it ``running``; a finished or failed import is left alone
   (delivery is at least once), another tenant's is not found.
2. Read the file's rows and the tenant's employees, and plan every row (:mod:`hr.import_plan`).
3. Apply the plan in batches of ``batch_rows`` rows, in plan order. Each batch is one
   transaction: its new and changed employees, its rows of the report, and the progress and
   counts on the import's row. A batch either happens whole or not at all, and the page's
   progress bar moves batch by batch.
4. Mark the import ``finished``.

A retry (after a crash or a lost connection) plans again and skips the lines the report already
holds: what a committed batch did stays done, and nothing is applied twice.

Worker-side code: no Flask, no models; SQL on psycopg.
"""

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from itertools import groupby
from typing import Any

import psycopg

from hr.employee_csv import FileRefused, employee_rows
from hr.import_plan import CREATED, REFUSED, UNCHANGED, UPDATED, Existing, Step, plan_import
from jobqueue import PermanentError

BATCH_ROWS = 500
OUTCOMES = (CREATED, UPDATED, UNCHANGED, REFUSED)

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]

BEGIN = """
UPDATE employee_imports
SET state = 'running', started_at = coalesce(started_at, now())
WHERE id = %(import_id)s AND tenant_id = %(tenant_id)s AND state IN ('queued', 'running')
RETURNING content
"""
EXISTING = """
SELECT e.email, e.id, e.name, e.department, manager.email
FROM employees e LEFT JOIN employees manager ON manager.id = e.manager_id
WHERE e.tenant_id = %(tenant_id)s
"""
REPORTED = "SELECT line FROM employee_import_rows WHERE import_id = %(import_id)s"
CREATE = """
INSERT INTO employees (tenant_id, name, email, department, manager_id)
SELECT %(tenant_id)s, name, email, department, manager_id
FROM unnest(%(names)s::text[], %(emails)s::text[], %(departments)s::text[],
            %(managers)s::bigint[]) AS new (name, email, department, manager_id)
RETURNING email, id
"""
UPDATE = """
UPDATE employees
SET name = changed.name, department = changed.department, manager_id = changed.manager_id
FROM unnest(%(ids)s::bigint[], %(names)s::text[], %(departments)s::text[],
            %(managers)s::bigint[]) AS changed (id, name, department, manager_id)
WHERE employees.tenant_id = %(tenant_id)s AND employees.id = changed.id
"""
REPORT = """
INSERT INTO employee_import_rows (tenant_id, import_id, line, email, name, outcome, note)
SELECT %(tenant_id)s, %(import_id)s, line, email, name, outcome, note
FROM unnest(%(lines)s::int[], %(emails)s::text[], %(names)s::text[], %(outcomes)s::text[],
            %(notes)s::text[]) AS reported (line, email, name, outcome, note)
"""
PROGRESS = """
UPDATE employee_imports
SET processed_rows = processed_rows + %(rows)s,
    created_rows = created_rows + %(created)s,
    updated_rows = updated_rows + %(updated)s,
    unchanged_rows = unchanged_rows + %(unchanged)s,
    refused_rows = refused_rows + %(refused)s
WHERE id = %(import_id)s AND tenant_id = %(tenant_id)s AND state = 'running'
"""
FINISH = """
UPDATE employee_imports SET state = 'finished', finished_at = now()
WHERE id = %(import_id)s AND tenant_id = %(tenant_id)s AND state = 'running'
"""
FAIL = """
UPDATE employee_imports SET state = 'failed', finished_at = now(), error = %(error)s
WHERE id = %(import_id)s AND tenant_id = %(tenant_id)s AND state IN ('queued', 'running')
"""


def run_import(
    connect: Connect, tenant_id: int, import_id: int, batch_rows: int = BATCH_ROWS
) -> None:
    """Apply import ``import_id`` of ``tenant_id``; raises PermanentError if there is none."""
    key = {"tenant_id": tenant_id, "import_id": import_id}
    with connect() as connection:
        begun = connection.execute(BEGIN, key).fetchone()
        if begun is None:
            state = connection.execute(
                "SELECT state FROM employee_imports WHERE id = %(import_id)s"
                " AND tenant_id = %(tenant_id)s",
                key,
            ).fetchone()
            if state is None:
                raise PermanentError(f"there is no employee import {import_id} for this tenant")
            return  # finished or failed already: a duplicate delivery
        connection.commit()
        existing = _existing(connection, tenant_id)
        reported = {line for (line,) in connection.execute(REPORTED, key)}
        try:
            rows = employee_rows(begun[0])
        except FileRefused as error:  # checked at upload; the same text cannot change its mind
            raise PermanentError(f"the file cannot be read: {error}") from None
        plan = [step for step in plan_import(rows, existing) if step.row.line not in reported]
        ids = {email: known.id for email, known in existing.items()}
        for batch in _batches(plan, batch_rows):
            _apply(connection, key, batch, ids)
            connection.commit()
        connection.execute(FINISH, key)


def fail_import(connect: Connect, tenant_id: int, import_id: int, error: str) -> None:
    """Mark the import failed with ``error``, unless it is over already."""
    with connect() as connection:
        connection.execute(FAIL, {"tenant_id": tenant_id, "import_id": import_id, "error": error})


def _existing(connection: psycopg.Connection[Any], tenant_id: int) -> dict[str, Existing]:
    rows = connection.execute(EXISTING, {"tenant_id": tenant_id})
    return {email: Existing(*rest) for email, *rest in rows}


def _batches(plan: list[Step], size: int) -> Iterator[list[Step]]:
    for start in range(0, len(plan), size):
        yield plan[start : start + size]


def _apply(
    connection: psycopg.Connection[Any], key: dict[str, int], batch: list[Step],
    ids: dict[str, int],
) -> None:  # fmt: skip
    """Write one batch: employees depth by depth (a new manager before their reports), the
    report's rows and the progress. Not committed."""
    for _, level in groupby(batch, key=lambda step: step.depth):
        steps = list(level)
        created = [step.row for step in steps if step.outcome == CREATED]
        if created:
            rows = connection.execute(CREATE, {**key, **_columns(created, ids)})
            ids.update(dict(rows.fetchall()))
        updated = [step.row for step in steps if step.outcome == UPDATED]
        if updated:
            columns = _columns(updated, ids)
            connection.execute(UPDATE, {**key, **columns, "ids": [ids[r.email] for r in updated]})
    connection.execute(
        REPORT,
        {
            **key,
            "lines": [step.row.line for step in batch],
            "emails": [step.row.email for step in batch],
            "names": [step.row.name for step in batch],
            "outcomes": [step.outcome for step in batch],
            "notes": [step.note for step in batch],
        },
    )
    counts = Counter(step.outcome for step in batch)
    connection.execute(
        PROGRESS,
        {**key, "rows": len(batch), **{outcome: counts[outcome] for outcome in OUTCOMES}},
    )


def _columns(rows: list[Any], ids: dict[str, int]) -> dict[str, list[Any]]:
    return {
        "names": [row.name for row in rows],
        "emails": [row.email for row in rows],
        "departments": [row.department for row in rows],
        "managers": [ids[row.manager_email] if row.manager_email else None for row in rows],
    }
