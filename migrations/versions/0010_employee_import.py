"""Employee imports, the start of each notification attempt, and the import in the audit log.

- ``employee_imports``: an uploaded CSV file of employees (its text), the state of the
  background job that applies it, its progress and its counts. The partial unique index
  ``employee_imports_one_at_a_time_key`` allows one waiting or running import per tenant.
- ``employee_import_rows``: the report, one row per line of the file (created, updated,
  unchanged or refused, with what changed or why not), tied to its import by the composite
  foreign key ``(tenant_id, import_id)``.
- ``review_notice_starts``: the notification attempt a worker thread has begun, written by the
  task itself, so that the cycle page tells a claimed-but-waiting (prefetched) notice, "queued",
  from one being sent.
- ``audit_log``: the actions and targets gain ``employees.import`` and ``employee_import``.

Revision ID: 0010_employee_import
Revises: 0009_console_search
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_employee_import"
down_revision = "0009_console_search"
branch_labels = None
depends_on = None

TIMESTAMPTZ = sa.DateTime(timezone=True)
IMPORT_STATES = ("queued", "running", "finished", "failed")
ROW_OUTCOMES = ("created", "updated", "unchanged", "refused")
ACTIONS = (
    "job.requeue",
    "job.cancel",
    "job.run_now",
    "job.discard",
    "queue.pause",
    "queue.resume",
    "worker.drain",
)
TARGETS = ("job", "failure_group", "queue", "worker")
NEW_ACTIONS = ("employees.import",)
NEW_TARGETS = ("employee_import",)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    op.create_table(
        "employee_imports",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("created_by", sa.BigInteger(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("filename", sa.Text(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("total_rows", sa.Integer(), nullable=False),
        sa.Column("processed_rows", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("created_rows", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("updated_rows", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("unchanged_rows", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("refused_rows", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("started_at", TIMESTAMPTZ, nullable=True),
        sa.Column("finished_at", TIMESTAMPTZ, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            _one_of("state", IMPORT_STATES), name=op.f("employee_imports_state_check")
        ),
        sa.CheckConstraint(
            "processed_rows BETWEEN 0 AND total_rows", name=op.f("employee_imports_progress_check")
        ),
        sa.CheckConstraint(
            "(state IN ('finished', 'failed')) = (finished_at IS NOT NULL)",
            name=op.f("employee_imports_finished_at_check"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("employee_imports_tenant_id_fkey")
        ),
        sa.ForeignKeyConstraint(
            ["created_by"], ["users.id"], name=op.f("employee_imports_created_by_fkey")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("employee_imports_pkey")),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("employee_imports_tenant_id_id_key")),
    )
    op.create_index(
        "employee_imports_one_at_a_time_key",
        "employee_imports",
        ["tenant_id"],
        unique=True,
        postgresql_where=sa.text("state IN ('queued', 'running')"),
    )
    op.create_table(
        "employee_import_rows",
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("import_id", sa.BigInteger(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.CheckConstraint(
            _one_of("outcome", ROW_OUTCOMES), name=op.f("employee_import_rows_outcome_check")
        ),
        sa.CheckConstraint(
            "outcome <> 'refused' OR note IS NOT NULL",
            name=op.f("employee_import_rows_refusal_has_reason_check"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "import_id"],
            ["employee_imports.tenant_id", "employee_imports.id"],
            name=op.f("employee_import_rows_tenant_id_import_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("employee_import_rows_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("import_id", "line", name=op.f("employee_import_rows_pkey")),
    )
    op.create_table(
        "review_notice_starts",
        sa.Column("job_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("cycle_id", sa.BigInteger(), nullable=False),
        sa.Column("reviewer_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id", "cycle_id"],
            ["review_cycles.tenant_id", "review_cycles.id"],
            name=op.f("review_notice_starts_tenant_id_cycle_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "reviewer_id"],
            ["employees.tenant_id", "employees.id"],
            name=op.f("review_notice_starts_tenant_id_reviewer_id_fkey"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("review_notice_starts_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("review_notice_starts_pkey")),
    )
    _audit_values(ACTIONS + NEW_ACTIONS, TARGETS + NEW_TARGETS)


def downgrade() -> None:
    op.execute(
        sa.text(
            "DELETE FROM audit_log WHERE action IN :actions OR target_type IN :targets"
        ).bindparams(
            sa.bindparam("actions", NEW_ACTIONS, expanding=True),
            sa.bindparam("targets", NEW_TARGETS, expanding=True),
        )
    )
    _audit_values(ACTIONS, TARGETS)
    op.drop_table("review_notice_starts")
    op.drop_table("employee_import_rows")
    op.drop_index("employee_imports_one_at_a_time_key", table_name="employee_imports")
    op.drop_table("employee_imports")


def _audit_values(actions: tuple[str, ...], targets: tuple[str, ...]) -> None:
    for name, column, values in (
        ("audit_log_action_check", "action", actions),
        ("audit_log_target_type_check", "target_type", targets),
    ):
        op.drop_constraint(op.f(name), "audit_log", type_="check")
        op.create_check_constraint(op.f(name), "audit_log", _one_of(column, values))
