"""Employee imports: the uploaded CSV file, where its background job stands, and its report.

Both tables carry ``tenant_id``; a report row points at its import through the composite
foreign key ``(tenant_id, import_id)``, so a report can never mix tenants. The partial unique
index ``employee_imports_one_at_a_time_key`` lets a tenant have one import waiting or running,
whatever the calling code does.
"""

from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from models import db
from models.people import one_of


class ImportState(StrEnum):
    """queued -> running -> finished | failed. Drawn in docs/howto/import-employees.md."""

    QUEUED = "queued"  # stored; its job has not started yet
    RUNNING = "running"  # the job works through the file, one committed batch at a time
    FINISHED = "finished"  # every row applied or refused: the report is complete
    FAILED = "failed"  # stopped before the end; the batches committed so far stay applied


class RowOutcome(StrEnum):
    CREATED = "created"  # a new employee
    UPDATED = "updated"  # an employee with this e-mail existed; the note says what changed
    UNCHANGED = "unchanged"  # an employee with this e-mail existed, exactly as in the file
    REFUSED = "refused"  # not applied; the note says why


class EmployeeImport(db.Model):
    __tablename__ = "employee_imports"
    __table_args__ = (
        UniqueConstraint("tenant_id", "id"),
        CheckConstraint(one_of("state", ImportState), name="state"),
        CheckConstraint("processed_rows BETWEEN 0 AND total_rows", name="progress"),
        CheckConstraint(
            "(state IN ('finished', 'failed')) = (finished_at IS NOT NULL)", name="finished_at"
        ),
        Index(
            "employee_imports_one_at_a_time_key",
            "tenant_id",
            unique=True,
            postgresql_where=text("state IN ('queued', 'running')"),
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    created_by: Mapped[int | None] = mapped_column(BigInteger, ForeignKey("users.id"))  # None: CLI
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    filename: Mapped[str] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)  # the file, decoded from UTF-8
    state: Mapped[str] = mapped_column(Text, server_default=text("'queued'"))
    total_rows: Mapped[int] = mapped_column(Integer)  # data rows, the header not counted
    processed_rows: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    created_rows: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    updated_rows: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    unchanged_rows: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    refused_rows: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    job_id: Mapped[int | None] = mapped_column(BigInteger)  # no foreign key: jobs are pruned
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)  # why a failed import stopped


class EmployeeImportRow(db.Model):
    """One line of the file and what became of it: the report."""

    __tablename__ = "employee_import_rows"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "import_id"],
            ["employee_imports.tenant_id", "employee_imports.id"],
            ondelete="CASCADE",
        ),
        CheckConstraint(one_of("outcome", RowOutcome), name="outcome"),
        CheckConstraint("outcome <> 'refused' OR note IS NOT NULL", name="refusal_has_reason"),
    )

    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    import_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    line: Mapped[int] = mapped_column(Integer, primary_key=True)  # in the file; the header is 1
    email: Mapped[str] = mapped_column(Text)  # as written in the file
    name: Mapped[str] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(Text)
    note: Mapped[str | None] = mapped_column(Text)
