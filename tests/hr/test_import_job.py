"""The import job against the real database: batches that commit whole, a resume that skips what
is done, loops never half applied, a second run that writes nothing, one import at a time."""

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
import pytest
from sqlalchemy.orm import Session

from hr.errors import StateConflict
from hr.import_job import run_import
from hr.imports import start_import
from hr.tasks import IMPORT_EMPLOYEES, IMPORTS_QUEUE, import_employees
from jobqueue import JobContext, JobStore, enqueue
from tests.hr.conftest import Org
from tests.support.db import scalar
from tests.support.processes import wait_until

Conn = psycopg.Connection[Any]
Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
HEADER = "name,email,department,manager_email\n"
# Every manager chain of the tenant, followed upwards: one that comes back to its start loops.
LOOPS = """
WITH RECURSIVE up (start, id, steps) AS (
    SELECT id, manager_id, 1 FROM employees WHERE tenant_id = %s AND manager_id IS NOT NULL
    UNION ALL
    SELECT up.start, e.manager_id, up.steps + 1 FROM up JOIN employees e ON e.id = up.id
    WHERE e.manager_id IS NOT NULL AND up.id <> up.start AND up.steps < 100
)
SELECT count(*) FROM up WHERE id = start
"""


@pytest.fixture
def connect(database_url: str) -> Connect:
    """Connections as the worker's pool lends them: committed when the block ends."""

    @contextmanager
    def connection() -> Iterator[psycopg.Connection[Any]]:
        with psycopg.connect(database_url) as borrowed:
            yield borrowed

    return connection


def stored(session: Session, org: Org, body: str) -> int:
    """An import of ``body`` stored and enqueued (no worker runs it); its id."""
    started = start_import(session, org.tenant.id, "people.csv", (HEADER + body).encode(), None)
    session.commit()
    return started.id


def people(count: int, domain: str = "x.example") -> str:
    return "".join(f"E{n},e{n}@{domain},Sales,\n" for n in range(1, count + 1))


def import_row(conn: Conn, import_id: int) -> tuple[Any, ...]:
    row = conn.execute(
        "SELECT state, processed_rows, created_rows, updated_rows, unchanged_rows, refused_rows"
        " FROM employee_imports WHERE id = %s",
        (import_id,),
    ).fetchone()
    assert row is not None
    return tuple(row)


def emails(conn: Conn, pattern: str = "e%@x.example") -> list[str]:
    rows = conn.execute("SELECT email FROM employees WHERE email LIKE %s ORDER BY id", (pattern,))
    return [email for (email,) in rows]


def reported_lines(conn: Conn, import_id: int) -> list[int]:
    rows = conn.execute(
        "SELECT line FROM employee_import_rows WHERE import_id = %s ORDER BY line", (import_id,)
    )
    return [line for (line,) in rows]


def test_each_batch_commits_whole_and_a_retry_resumes_after_the_last_one(
    session: Session, org: Org, conn: Conn, connect: Connect
) -> None:
    import_id = stored(session, org, people(10))  # e1..e10 on lines 2..11
    conn.execute(
        "CREATE FUNCTION refuse_e8() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF NEW.email = 'e8@x.example' THEN RAISE EXCEPTION 'e8 refused'; END IF;"
        " RETURN NEW; END $$"
    )
    conn.execute("CREATE TRIGGER refuse_e8 BEFORE INSERT ON employees"
                 " FOR EACH ROW EXECUTE FUNCTION refuse_e8()")  # fmt: skip

    # Batches of three: e1-e3, e4-e6, then e7-e9 fails on e8.
    with pytest.raises(psycopg.errors.RaiseException, match="e8 refused"):
        run_import(connect, org.tenant.id, import_id, batch_rows=3)
    assert import_row(conn, import_id) == ("running", 6, 6, 0, 0, 0)
    assert emails(conn) == [f"e{n}@x.example" for n in range(1, 7)]  # not e7: its batch failed
    assert reported_lines(conn, import_id) == list(range(2, 8))

    conn.execute("DROP TRIGGER refuse_e8 ON employees")
    run_import(connect, org.tenant.id, import_id, batch_rows=3)  # as the job's retry does
    assert import_row(conn, import_id) == ("finished", 10, 10, 0, 0, 0)
    assert emails(conn) == [f"e{n}@x.example" for n in range(1, 11)]
    assert reported_lines(conn, import_id) == list(range(2, 12))


def test_a_loop_spread_over_batches_is_never_half_applied(
    session: Session, org: Org, conn: Conn, connect: Connect
) -> None:
    boss, ana = org.people[0], org.people[1]  # ana reports to boss
    body = (
        f"Loop A,a@x.example,Sales,c@x.example\n{people(4, 'y.example')}"
        f"Loop B,b@x.example,Sales,a@x.example\n{people(4, 'z.example')}"
        f"Loop C,c@x.example,Sales,b@x.example\n"
        f"{boss.name},{boss.email},{boss.department},{ana.email}\n"
    )
    import_id = stored(session, org, body)
    run_import(connect, org.tenant.id, import_id, batch_rows=2)
    assert emails(conn, "_@x.example") == []
    refused = conn.execute(
        "SELECT email, note FROM employee_import_rows WHERE import_id = %s"
        " AND outcome = 'refused' ORDER BY line",
        (import_id,),
    ).fetchall()
    assert refused == [
        ("a@x.example", "the manager chain would loop: a@x.example -> c@x.example -> b@x.example"
                        " -> a@x.example"),
        ("b@x.example", "the manager chain would loop: a@x.example -> c@x.example -> b@x.example"
                        " -> a@x.example"),
        ("c@x.example", "the manager chain would loop: a@x.example -> c@x.example -> b@x.example"
                        " -> a@x.example"),
        (boss.email, f"the manager chain would loop: {boss.email} -> {ana.email} -> {boss.email}"),
    ]  # fmt: skip
    assert scalar(conn, "SELECT manager_id FROM employees WHERE id = %s", boss.id) is None
    assert scalar(conn, LOOPS, org.tenant.id) == 0
    assert import_row(conn, import_id) == ("finished", 12, 8, 0, 0, 4)


def test_a_second_import_of_the_same_file_writes_nothing(
    session: Session, org: Org, conn: Conn, connect: Connect
) -> None:
    body = f"Boss,boss@x.example,Leadership,\n{people(30)}Bad,not an address,Sales,\n"
    body = body.replace(",Sales,\n", ",Sales,boss@x.example\n")
    run_import(connect, org.tenant.id, stored(session, org, body), batch_rows=7)
    versions = "SELECT string_agg(id || ':' || xmin || ':' || ctid, ',' ORDER BY id) FROM employees"
    before = scalar(conn, versions)

    again = stored(session, org, body)
    run_import(connect, org.tenant.id, again, batch_rows=7)
    assert import_row(conn, again) == ("finished", 32, 0, 0, 31, 1)
    assert scalar(conn, versions) == before  # no row was written, not even with equal values


def test_the_last_failed_attempt_marks_the_import_failed_so_the_next_can_start(
    session: Session, org: Org, conn: Conn, connect: Connect
) -> None:
    import_id = stored(session, org, people(3))
    conn.execute(
        "ALTER TABLE employees ADD CONSTRAINT short_names CHECK (length(name) < 2) NOT VALID"
    )
    claimed = JobStore(conn).claim(IMPORTS_QUEUE, 1, "host:1:test", 30)[0]
    first = JobContext(claimed, "host:1:test", connect)
    with pytest.raises(psycopg.errors.CheckViolation):
        import_employees(first, import_id=import_id)
    assert import_row(conn, import_id)[0] == "running"  # attempt 1 of 3: it will be retried

    last = JobContext(claimed._replace(attempt=claimed.max_attempts), "host:1:test", connect)
    with pytest.raises(psycopg.errors.CheckViolation):
        import_employees(last, import_id=import_id)
    state, error = conn.execute(
        "SELECT state, error FROM employee_imports WHERE id = %s", (import_id,)
    ).fetchone()  # type: ignore[misc]
    assert state == "failed" and error.startswith(
        'CheckViolation: new row for relation "employees"'
    )
    conn.execute("ALTER TABLE employees DROP CONSTRAINT short_names")
    stored(session, org, people(3))  # not refused: the failed one is over


def test_an_import_whose_job_is_over_does_not_block_the_next(
    session: Session, org: Org, conn: Conn
) -> None:
    stuck = stored(session, org, people(3))
    conn.execute("UPDATE jobs SET state = 'dead', finished_at = now()")  # e.g. leases expired
    stored(session, org, people(3))
    state, error = conn.execute(
        "SELECT state, error FROM employee_imports WHERE id = %s", (stuck,)
    ).fetchone()  # type: ignore[misc]
    assert (state, error) == ("failed", "its job ended (dead) before the import was done")


def test_a_second_import_of_a_tenant_is_refused_even_when_both_start_at_once(
    app: Any, session: Session, org: Org, conn: Conn, database_url: str
) -> None:
    with psycopg.connect(database_url) as first:  # an import started, not yet committed
        first_id = scalar(
            first,
            "INSERT INTO employee_imports (tenant_id, filename, content, total_rows)"
            " VALUES (%s, 'first.csv', '', 1) RETURNING id",
            org.tenant.id,
        )
        job = enqueue(first, IMPORT_EMPLOYEES, {"import_id": first_id}, tenant_id=org.tenant.id)
        first.execute("UPDATE employee_imports SET job_id = %s", (job,))
        outcome: list[BaseException | None] = []

        def second() -> None:
            with app.app_context():
                from models import db

                try:
                    start_import(db.session(), org.tenant.id, "second.csv",
                                 (HEADER + people(1)).encode(), None)  # fmt: skip
                    db.session.commit()
                    outcome.append(None)
                except StateConflict as error:
                    db.session.rollback()
                    outcome.append(error)

        thread = threading.Thread(target=second)
        thread.start()
        wait_until(
            lambda: (
                scalar(
                    conn,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND query LIKE 'INSERT INTO employee_imports%%'",
                )
                == 1
            ),
            message="the second import never waited on the first one's index entry",
        )
        first.commit()
        thread.join(10)
    assert len(outcome) == 1 and isinstance(outcome[0], StateConflict)
    assert str(outcome[0]).startswith(f"Import {first_id} (first.csv) is queued: one import at")
    assert scalar(conn, "SELECT string_agg(filename, ',') FROM employee_imports") == "first.csv"
    assert scalar(conn, "SELECT count(*) FROM jobs") == 1
