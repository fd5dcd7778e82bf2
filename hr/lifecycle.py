"""A review cycle's life after activation, as the durable workflow ``review_cycle_lifecycle``.

Activation starts it in its own transaction (:func:`start_lifecycle`). It then:

1. sleeps until ``reminder_days`` (a cycle setting) before the due date;
2. reminds every reviewer who still has open reviews: one ``hr.remind_reviewer`` job each,
   enqueued in the step's transaction (exactly once), and deduplicated by the database per
   cycle, reviewer and reminder round (index ``jobs_remind_reviewer_key``);
3. sleeps until the due date;
4. waits for HR calibration (event ``calibration``; after a send-back or a timeout
   ``calibration#2``, ``#3`` ...): an HR admin approves, or sends the cycle back with a comment,
   on the cycle page. On each timeout the tenant's HR admins get an escalation e-mail
   (``hr.escalate_calibration``) and the wait goes on;
5. on approval closes the cycle and compiles its results report in a background step whose
   progress (``cycle_reports.done`` of ``total``) the cycle page shows.

Days are ``PAUTA_CYCLE_DAY_SECONDS`` seconds long (86,400 unless tests shorten them), read when
a cycle is activated; the calibration timeout is ``PAUTA_CALIBRATION_TIMEOUT_DAYS`` days (7).
No Flask here: the worker imports this module through ``hr.tasks``.
"""

import csv
import io
import os
from dataclasses import dataclass
from datetime import date
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from jobqueue import JobRequest, enqueue_many
from workflows import WorkflowContext, start_workflow, workflow
from workflows.store import WorkflowInspector

LIFECYCLE = "review_cycle_lifecycle"
REMIND_REVIEWER = "hr.remind_reviewer"
ESCALATE_CALIBRATION = "hr.escalate_calibration"
CALIBRATION = "calibration"
REPORT_BATCH = 25  # reviewees compiled per committed batch


DAY_SECONDS = 86_400.0
CALIBRATION_TIMEOUT_DAYS = 7.0


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    day_seconds: float = DAY_SECONDS
    calibration_timeout_days: float = CALIBRATION_TIMEOUT_DAYS

    @classmethod
    def from_environ(cls) -> "LifecycleSettings":
        env = os.environ
        return cls(
            day_seconds=float(env.get("PAUTA_CYCLE_DAY_SECONDS", DAY_SECONDS)),
            calibration_timeout_days=float(
                env.get("PAUTA_CALIBRATION_TIMEOUT_DAYS", CALIBRATION_TIMEOUT_DAYS)
            ),
        )


def calibration_key(round_number: int) -> str:
    return CALIBRATION if round_number == 1 else f"{CALIBRATION}#{round_number}"


def start_lifecycle(
    session: Any,
    tenant_id: int,
    cycle_id: int,
    due_date: date,
    reminder_days: int,
    today: date,
    settings: LifecycleSettings | None = None,
) -> int:
    """Start the cycle's lifecycle in the caller's transaction (activation's); its id."""
    settings = settings or LifecycleSettings.from_environ()
    day = settings.day_seconds
    due_after = max((due_date - today).days, 0) * day
    schedule = {
        "cycle_id": cycle_id,
        "remind_after": max(due_after - reminder_days * day, 0.0),
        "due_after": due_after,
        "calibration_timeout": settings.calibration_timeout_days * day,
    }
    started = start_workflow(
        session, LIFECYCLE, schedule, tenant_id=tenant_id, idempotency_key=f"cycle:{cycle_id}"
    )
    return started.execution_id


@workflow(LIFECYCLE)
def review_cycle_lifecycle(
    ctx: WorkflowContext,
    cycle_id: int,
    remind_after: float,
    due_after: float,
    calibration_timeout: float,
) -> dict[str, Any]:
    ctx.sleep(remind_after)
    reminded = ctx.step(
        enqueue_reminders, ctx.tenant_id, cycle_id, 1, name="send-reminders", transactional=True
    )
    ctx.sleep(max(due_after - remind_after, 0.0))
    round_number, escalations = 1, 0
    while True:
        decision = ctx.wait_for(calibration_key(round_number), timeout=calibration_timeout)
        if decision is None:
            escalations += 1
            ctx.step(enqueue_escalations, ctx.tenant_id, cycle_id, round_number,
                     name=f"escalate-{round_number}", transactional=True)  # fmt: skip
        elif isinstance(decision.payload, dict) and decision.payload.get("approved"):
            break
        round_number += 1
    ctx.step(close_cycle, ctx.tenant_id, cycle_id, name="close-cycle", transactional=True)
    reviewees = ctx.step(compile_report, ctx.connection, ctx.tenant_id, cycle_id,
                         name="compile-report")  # fmt: skip
    return {"reminded": reminded, "escalations": escalations, "reviewees": reviewees,
            "approved_by": decision.decided_by}  # fmt: skip


def enqueue_reminders(
    connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int, round_number: int
) -> int:
    """One reminder job per reviewer with open reviews; returns how many."""
    reviewers = [
        row[0]
        for row in connection.execute(
            "SELECT DISTINCT reviewer_id FROM reviews WHERE tenant_id = %s AND cycle_id = %s"
            " AND status = 'open' ORDER BY reviewer_id",
            (tenant_id, cycle_id),
        )
    ]
    requests = [
        JobRequest(REMIND_REVIEWER,
                   {"cycle_id": cycle_id, "reviewer_id": reviewer, "round": round_number},
                   tenant_id=tenant_id)
        for reviewer in reviewers
    ]  # fmt: skip
    enqueue_many(connection, requests)
    return len(requests)


def enqueue_escalations(
    connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int, round_number: int
) -> int:
    """One escalation e-mail job per HR admin of the tenant; returns how many."""
    admins = [
        row[0]
        for row in connection.execute(
            "SELECT id FROM users WHERE tenant_id = %s AND role = 'hr_admin' ORDER BY id",
            (tenant_id,),
        )
    ]
    requests = [
        JobRequest(ESCALATE_CALIBRATION,
                   {"cycle_id": cycle_id, "user_id": admin, "round": round_number},
                   tenant_id=tenant_id)
        for admin in admins
    ]  # fmt: skip
    enqueue_many(connection, requests)
    return len(requests)


def close_cycle(connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int) -> str:
    """Close the cycle (if an HR admin has not already); returns its status before."""
    row = connection.execute(
        "SELECT status FROM review_cycles WHERE tenant_id = %s AND id = %s FOR UPDATE",
        (tenant_id, cycle_id),
    ).fetchone()
    if row is None:
        raise LookupError(f"there is no review cycle {cycle_id}")
    if row[0] == "active":
        connection.execute(
            "UPDATE review_cycles SET status = 'closed', closed_at = now()"
            " WHERE tenant_id = %s AND id = %s",
            (tenant_id, cycle_id),
        )
    return str(row[0])


REPORT_ROWS = """
SELECT e.id AS reviewee_id, e.name AS reviewee, e.email,
       round(avg(r.rating) FILTER (WHERE r.kind = 'self'), 2)::float8 AS self,
       round(avg(r.rating) FILTER (WHERE r.kind = 'manager'), 2)::float8 AS manager,
       round(avg(r.rating) FILTER (WHERE r.kind = 'peer'), 2)::float8 AS peer,
       count(*) FILTER (WHERE r.status = 'submitted') AS submitted, count(*) AS reviews
FROM reviews AS r
JOIN employees AS e ON e.tenant_id = r.tenant_id AND e.id = r.reviewee_id
WHERE r.tenant_id = %(tenant_id)s AND r.cycle_id = %(cycle_id)s
  AND r.reviewee_id = ANY (%(reviewees)s)
GROUP BY e.id
ORDER BY e.name, e.id
"""


def compile_report(connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int) -> int:
    """Compile the results report batch by batch, each batch committed (autocommit), so the
    cycle page shows the progress; run again (at least once), it starts over. Returns the
    number of reviewees."""
    reviewees = [
        row[0]
        for row in connection.execute(
            "SELECT DISTINCT reviewee_id FROM reviews WHERE tenant_id = %s AND cycle_id = %s"
            " ORDER BY reviewee_id",
            (tenant_id, cycle_id),
        )
    ]
    connection.execute(
        "INSERT INTO cycle_reports (tenant_id, cycle_id, state, done, total, rows)"
        " VALUES (%s, %s, 'compiling', 0, %s, '[]')"
        " ON CONFLICT (cycle_id) DO UPDATE SET state = 'compiling', done = 0,"
        " total = excluded.total, rows = '[]', started_at = now(), compiled_at = NULL",
        (tenant_id, cycle_id, len(reviewees)),
    )
    for start in range(0, len(reviewees), REPORT_BATCH):
        batch = reviewees[start : start + REPORT_BATCH]
        with connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(
                REPORT_ROWS, {"tenant_id": tenant_id, "cycle_id": cycle_id, "reviewees": batch}
            )
            rows = cursor.fetchall()
        connection.execute(
            "UPDATE cycle_reports SET rows = rows || %s, done = done + %s WHERE cycle_id = %s",
            (Jsonb(rows), len(batch), cycle_id),
        )
    connection.execute(
        "UPDATE cycle_reports SET state = 'ready', compiled_at = now() WHERE cycle_id = %s",
        (cycle_id,),
    )
    return len(reviewees)


def lifecycle_of(
    connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int
) -> dict[str, Any] | None:
    """What the cycle page shows of the lifecycle: the execution, where it is (its open wait),
    its history (steps and waits), the calibration key it waits on, and the report's progress.
    None for a cycle that was never activated."""
    row = connection.execute(
        "SELECT id FROM workflow_executions WHERE tenant_id = %s AND name = %s"
        " AND idempotency_key = %s ORDER BY id DESC LIMIT 1",
        (tenant_id, LIFECYCLE, f"cycle:{cycle_id}"),
    ).fetchone()
    if row is None:
        return None
    reader = WorkflowInspector(connection)
    execution = reader.execution(int(row[0]), tenant_id)
    if execution is None:
        return None
    waits = reader.waits(execution["id"])
    open_wait = next((wait for wait in waits if wait["satisfied_at"] is None), None)
    waiting_on = open_wait["key"] if open_wait and open_wait["kind"] == "event" else None
    return {
        "execution": execution,
        "steps": reader.steps(execution["id"]),
        "waits": waits,
        "open_wait": open_wait,
        "calibration_key": waiting_on
        if waiting_on and waiting_on.startswith(CALIBRATION)
        else None,
        "report": report_of(connection, tenant_id, cycle_id),
    }


def report_of(
    connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int
) -> dict[str, Any] | None:
    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(
            "SELECT state, done, total, rows, started_at, compiled_at FROM cycle_reports"
            " WHERE tenant_id = %s AND cycle_id = %s",
            (tenant_id, cycle_id),
        )
        return cursor.fetchone()


REPORT_COLUMNS = ("reviewee", "email", "self", "manager", "peer", "submitted", "reviews")


def report_csv(rows: list[dict[str, Any]]) -> str:
    """The report as CSV: one line per reviewee, average rating by kind, completion. Cells that
    a spreadsheet would read as a formula are quoted with a leading apostrophe."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(REPORT_COLUMNS)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in REPORT_COLUMNS])
    return out.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return "" if value is None else value
