"""Durable workflows: executions, their checkpointed steps and their waits (issue 11).

Revision ID: 0012_workflows
Revises: 0015_locale (re-chained after merging main, which brought 0015_locale after 0011)
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0012_workflows"
down_revision = "0015_locale"
branch_labels = None
depends_on = None

TIMESTAMPTZ = sa.DateTime(timezone=True)
# The audit log's CHECK lists, whole: those before this migration, then the workflow actions.
ACTIONS = (
    "job.requeue",
    "job.cancel",
    "job.run_now",
    "job.discard",
    "queue.pause",
    "queue.resume",
    "worker.drain",
    "employees.import",
)
TARGETS = ("job", "failure_group", "queue", "worker", "employee_import")
NEW_ACTIONS = ("workflow.event", "workflow.cancel", "workflow.resume")
NEW_TARGETS = ("workflow_execution",)
STATUSES = ("pending", "running", "waiting", "succeeded", "failed", "cancelled")
FINISHED = "status IN ('succeeded', 'failed', 'cancelled')"

# What an operator asks most, as views (docs/howto/write-a-workflow.md lists the queries).
VIEWS = {
    "workflow_open_waits": """
SELECT e.id AS execution_id, e.tenant_id, e.name, w.step_id, w.kind, w.key, w.wake_at,
       w.created_at AS waiting_since, now() - w.created_at AS waiting_for
FROM workflow_waits AS w
JOIN workflow_executions AS e ON e.id = w.execution_id
WHERE w.satisfied_at IS NULL AND e.status = 'waiting'
""",
    "workflow_step_timeline": """
SELECT o.execution_id, e.tenant_id, e.name AS workflow, o.step_id, o.name AS step, o.kind,
       o.attempts, o.started_at, o.finished_at, o.finished_at - o.started_at AS duration,
       o.error, w.decided_by, w.outcome AS wait_outcome
FROM operation_outputs AS o
JOIN workflow_executions AS e ON e.id = o.execution_id
LEFT JOIN workflow_waits AS w ON w.execution_id = o.execution_id AND w.step_id = o.step_id
""",
}


def upgrade() -> None:
    op.create_table(
        "workflow_executions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("version", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("input", JSONB(), server_default=sa.text("'{}'::jsonb"), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("output", JSONB(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("trace_context", JSONB(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", TIMESTAMPTZ, nullable=True),
        sa.CheckConstraint(
            "status IN (" + ", ".join(f"'{s}'" for s in STATUSES) + ")",
            name=op.f("workflow_executions_status_check"),
        ),
        sa.CheckConstraint(
            f"({FINISHED}) = (finished_at IS NOT NULL)",
            name=op.f("workflow_executions_finished_check"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("workflow_executions_tenant_id_fkey")
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["workflow_executions.id"],
            name=op.f("workflow_executions_parent_id_fkey"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("workflow_executions_pkey")),
        postgresql_with={"fillfactor": "70"},
    )
    # An idempotency key holds while its execution is unfinished.
    op.create_index(
        "workflow_executions_idempotency_key_idx",
        "workflow_executions",
        ["tenant_id", "name", "idempotency_key"],
        unique=True,
        postgresql_where=sa.text("idempotency_key IS NOT NULL AND finished_at IS NULL"),
    )
    # The console's lists: newest first, per tenant and per status (keyset on id).
    op.create_index(
        "workflow_executions_tenant_id_id_idx", "workflow_executions", ["tenant_id", "id"]
    )
    op.create_index("workflow_executions_status_id_idx", "workflow_executions", ["status", "id"])
    op.create_index(
        "workflow_executions_parent_id_idx",
        "workflow_executions",
        ["parent_id"],
        postgresql_where=sa.text("parent_id IS NOT NULL"),
    )
    op.create_table(
        "operation_outputs",
        sa.Column("execution_id", sa.BigInteger(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("output", JSONB(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("started_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(
            "kind IN ('step', 'transaction', 'sleep', 'wait')",
            name=op.f("operation_outputs_kind_check"),
        ),
        sa.CheckConstraint("attempts >= 1", name=op.f("operation_outputs_attempts_check")),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["workflow_executions.id"],
            name=op.f("operation_outputs_execution_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("execution_id", "step_id", name=op.f("operation_outputs_pkey")),
    )
    op.create_table(
        "workflow_waits",
        sa.Column("execution_id", sa.BigInteger(), nullable=False),
        sa.Column("step_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("wake_at", TIMESTAMPTZ, nullable=True),
        sa.Column("satisfied_at", TIMESTAMPTZ, nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.Column("payload", JSONB(), nullable=True),
        sa.Column("decided_by", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("kind IN ('sleep', 'event')", name=op.f("workflow_waits_kind_check")),
        sa.CheckConstraint(
            "(kind = 'sleep') = (key IS NULL) AND (kind = 'event' OR wake_at IS NOT NULL)",
            name=op.f("workflow_waits_shape_check"),
        ),
        sa.CheckConstraint(
            "outcome IN ('woke', 'event', 'timeout', 'cancelled')"
            " AND (outcome IS NULL) = (satisfied_at IS NULL)",
            name=op.f("workflow_waits_outcome_check"),
        ),
        sa.ForeignKeyConstraint(
            ["execution_id"],
            ["workflow_executions.id"],
            name=op.f("workflow_waits_execution_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("execution_id", "step_id", name=op.f("workflow_waits_pkey")),
    )
    # Open waits by kind and key (the console's "waiting on what"), and by wake time.
    op.create_index(
        "workflow_waits_open_key_idx",
        "workflow_waits",
        ["kind", "key", "created_at"],
        postgresql_where=sa.text("satisfied_at IS NULL"),
    )
    op.create_index(
        "workflow_waits_open_one_idx",
        "workflow_waits",
        ["execution_id"],
        unique=True,
        postgresql_where=sa.text("satisfied_at IS NULL"),
    )
    for name, body in VIEWS.items():
        op.execute(f"CREATE VIEW {name} AS {body}")
    _audit_values(ACTIONS + NEW_ACTIONS, TARGETS + NEW_TARGETS)
    # The review cycle's lifecycle (hr/lifecycle.py): when to remind, and the results report.
    op.add_column(
        "review_cycles",
        sa.Column("reminder_days", sa.SmallInteger(), server_default=sa.text("3"), nullable=False),
    )
    op.create_check_constraint(
        op.f("review_cycles_reminder_days_check"),
        "review_cycles",
        "reminder_days BETWEEN 0 AND 365",
    )
    op.create_table(
        "cycle_reports",
        sa.Column("cycle_id", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("rows", JSONB(), server_default=sa.text("'[]'::jsonb"), nullable=False),
        sa.Column("started_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("compiled_at", TIMESTAMPTZ, nullable=True),
        sa.CheckConstraint(
            "state IN ('compiling', 'ready') AND (state = 'ready') = (compiled_at IS NOT NULL)"
            " AND done BETWEEN 0 AND total",
            name=op.f("cycle_reports_state_check"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "cycle_id"],
            ["review_cycles.tenant_id", "review_cycles.id"],
            name=op.f("cycle_reports_tenant_id_cycle_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("cycle_id", name=op.f("cycle_reports_pkey")),
    )
    # One reminder per cycle, reviewer and round; one escalation per cycle, admin and round.
    for name, task, who in (
        ("jobs_remind_reviewer_key", "hr.remind_reviewer", "reviewer_id"),
        ("jobs_escalate_calibration_key", "hr.escalate_calibration", "user_id"),
    ):
        op.execute(
            f"CREATE UNIQUE INDEX {name} ON jobs (tenant_id, (payload ->> 'cycle_id'),"
            f" (payload ->> '{who}'), (payload ->> 'round')) WHERE task = '{task}'"
        )


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
    op.drop_index("jobs_escalate_calibration_key", table_name="jobs")
    op.drop_index("jobs_remind_reviewer_key", table_name="jobs")
    op.drop_table("cycle_reports")
    op.drop_column("review_cycles", "reminder_days")
    for name in VIEWS:
        op.execute(f"DROP VIEW {name}")
    op.execute("DELETE FROM jobs WHERE queue = 'workflows'")
    op.drop_table("workflow_waits")
    op.drop_table("operation_outputs")
    op.drop_table("workflow_executions")


def _audit_values(actions: tuple[str, ...], targets: tuple[str, ...]) -> None:
    for name, column, values in (
        ("audit_log_action_check", "action", actions),
        ("audit_log_target_type_check", "target_type", targets),
    ):
        op.drop_constraint(op.f(name), "audit_log", type_="check")
        op.create_check_constraint(
            op.f(name), "audit_log", f"{column} IN ({', '.join(repr(v) for v in values)})"
        )
