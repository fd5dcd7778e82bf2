"""Starting an employee import (from the page or the command line) and reading where it is.

Starting stores the file and enqueues its job (``hr.import_employees``) in the caller's
transaction: the import and its job commit together and the request answers at once; the job
does the work (:mod:`hr.import_job`). A tenant has at most one import waiting or running: the
partial unique index ``employee_imports_one_at_a_time_key`` holds it, against a concurrent
start too, whatever the code does.
"""

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from console.audit import record
from hr.employee_csv import FileRefused, read_upload
from hr.errors import InvalidInput, StateConflict
from hr.i18n import gettext
from hr.tasks import IMPORT_EMPLOYEES
from hr.text import is_one_line
from jobqueue import enqueue
from models import EmployeeImport, EmployeeImportRow, Job, User
from models.audit import AuditAction, AuditTarget
from models.imports import ImportState

UNDER_WAY = (ImportState.QUEUED, ImportState.RUNNING)
JOB_OVER = ("succeeded", "dead", "cancelled")
MAX_FILENAME = 200


@dataclass(frozen=True, slots=True)
class StartedImport:
    id: int
    filename: str
    rows: int
    job_id: int


def start_import(
    session: Session, tenant_id: int, filename: str, raw: bytes, actor: User | None
) -> StartedImport:
    """Store the file and enqueue its import (not committed); the audit log records an HR
    admin's. Raises InvalidInput for a file that cannot be imported, StateConflict while
    another import of the tenant is under way.

    The request waits for this, so it is a few statements: the insert itself finds out, through
    the unique index, whether another import is under way (and, only then, whether that one
    was abandoned).
    """
    name = readable(filename)
    try:
        upload = read_upload(raw)
    except FileRefused as error:
        raise InvalidInput(
            gettext("%(file)s cannot be imported: %(error)s.", file=name, error=error)
        ) from None
    stored = {
        "tenant_id": tenant_id,
        "created_by": actor.id if actor else None,
        "filename": name,
        "content": upload.text,
        "total_rows": upload.rows,
    }
    import_id = _insert(session, stored)
    if import_id is None:
        settle_abandoned(session, tenant_id)
        import_id = _insert(session, stored)
    if import_id is None:
        raise StateConflict(_under_way(session, tenant_id))
    job_id = enqueue(session, IMPORT_EMPLOYEES, {"import_id": import_id}, tenant_id=tenant_id)
    session.execute(
        update(EmployeeImport)
        .where(EmployeeImport.tenant_id == tenant_id, EmployeeImport.id == import_id)
        .values(job_id=job_id)
    )
    if actor is not None:  # affected: the one job enqueued
        details = {"file": name, "rows": upload.rows}
        record(session, actor, AuditAction.EMPLOYEE_IMPORT, AuditTarget.EMPLOYEE_IMPORT,
               import_id, tenant_id=tenant_id, details=details)  # fmt: skip
    return StartedImport(import_id, name, upload.rows, job_id)


def _insert(session: Session, stored: dict[str, Any]) -> int | None:
    """The new import's id; None if the tenant has one under way (a concurrent one included:
    the insert waits for it to commit or roll back)."""
    return session.scalar(
        insert(EmployeeImport)
        .values(**stored)
        .on_conflict_do_nothing(
            index_elements=[EmployeeImport.tenant_id],
            index_where=EmployeeImport.state.in_(UNDER_WAY),
        )
        .returning(EmployeeImport.id)
    )


def _under_way(session: Session, tenant_id: int) -> str:
    busy = session.scalars(
        select(EmployeeImport).where(
            EmployeeImport.tenant_id == tenant_id, EmployeeImport.state.in_(UNDER_WAY)
        )
    ).first()
    if busy is None:
        return gettext(
            "An import is under way: one import at a time. Wait for it to finish, then start "
            "this one."
        )
    return gettext(
        "Import %(id)s (%(file)s) is %(state)s: one import at a time. Wait for it to finish, "
        "then start this one.",
        id=busy.id,
        file=busy.filename,
        state=gettext(busy.state),
    )


def settle_abandoned(session: Session, tenant_id: int) -> None:
    """Mark failed the tenant's imports still waiting or running whose job is over (dead after
    a crash, cancelled by an operator) or gone, so they no longer block the next one."""
    abandoned = session.execute(
        select(EmployeeImport, Job.state)
        .outerjoin(Job, (Job.id == EmployeeImport.job_id) & (Job.tenant_id == tenant_id))
        .where(
            EmployeeImport.tenant_id == tenant_id,
            EmployeeImport.state.in_(UNDER_WAY),
            or_(Job.id.is_(None), Job.state.in_(JOB_OVER)),
        )
        .with_for_update(of=EmployeeImport)
    )
    for stale, job_state in abandoned:
        stale.state = ImportState.FAILED
        stale.finished_at = func.now()
        stale.error = f"its job ended ({job_state or 'pruned'}) before the import was done"


def job_over(session: Session, started: EmployeeImport) -> str | None:
    """How the job of an import still waiting or running ended (dead, cancelled...), if it
    did: the import will not move any more. None while the job may still run it."""
    if started.state not in UNDER_WAY:
        return None
    state = session.scalar(
        select(Job.state).where(Job.id == started.job_id, Job.tenant_id == started.tenant_id)
    )
    if state is None:
        return "pruned"
    return state if state in JOB_OVER else None


def report_rows(
    session: Session, started: EmployeeImport, outcome: str, limit: int | None = None
) -> list[EmployeeImportRow]:
    """The report's rows with this outcome, in file order."""
    return list(
        session.scalars(
            select(EmployeeImportRow)
            .where(
                EmployeeImportRow.tenant_id == started.tenant_id,
                EmployeeImportRow.import_id == started.id,
                EmployeeImportRow.outcome == outcome,
            )
            .order_by(EmployeeImportRow.line)
            .limit(limit)
        )
    )


def readable(filename: str) -> str:
    """The uploaded file's name as shown: one line, at most 200 characters."""
    name = filename.strip() if is_one_line(filename) else ""
    return name[:MAX_FILENAME] or "employees.csv"
