"""Keeping work in bounds: a per-job timeout, the 'timed_out' attempt outcome, the count of
threads a worker process abandoned to a task that overran its timeout, and the request to cancel
a running job (with the 'cancelled' attempt outcome); and the index of the claim that shares a
queue fairly between tenants (built CONCURRENTLY: writes to jobs go on meanwhile).

Revision ID: 0013_control
Revises: 0015_locale
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_control"
down_revision = "0012_workflows"
branch_labels = None
depends_on = None

OUTCOME_CHECK = "job_attempts_outcome_check"
# The full list, old and new (a CHECK constraint is replaced whole).
OUTCOMES_BEFORE = "outcome IN ('succeeded', 'failed', 'lease_expired', 'released')"
OUTCOMES_AFTER = (
    "outcome IN ('succeeded', 'failed', 'lease_expired', 'released', 'timed_out', 'cancelled')"
)


# audit_log's actions: the full list before, and the one this revision adds.
AUDIT_ACTIONS = (
    "job.requeue",
    "job.cancel",
    "job.run_now",
    "job.discard",
    "queue.pause",
    "queue.resume",
    "worker.drain",
    "employees.import",
    "workflow.event",
    "workflow.cancel",
    "workflow.resume",
)
NEW_AUDIT_ACTIONS = ("queue.rate_limit",)

TENANT_INDEX = (
    "CREATE INDEX CONCURRENTLY jobs_claim_tenant_idx ON jobs"
    " (queue, tenant_id, priority, available_at, id) WHERE state = 'available'"
)


def upgrade() -> None:
    op.add_column("jobs", sa.Column("timeout_seconds", sa.Double(), nullable=True))
    op.create_check_constraint(
        op.f("jobs_timeout_seconds_check"), "jobs", "timeout_seconds > 0::double precision"
    )
    op.drop_constraint(op.f(OUTCOME_CHECK), "job_attempts", type_="check")
    op.create_check_constraint(op.f(OUTCOME_CHECK), "job_attempts", OUTCOMES_AFTER)
    op.add_column(
        "jobs", sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column(
        "workers",
        sa.Column("abandoned_threads", sa.Integer(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column("queues", sa.Column("rate_limit", sa.Integer(), nullable=True))
    op.add_column(
        "queues",
        sa.Column("rate_period_seconds", sa.Double(), server_default=sa.text("1"), nullable=False),
    )
    op.add_column(
        "queues",
        sa.Column("rate_tokens", sa.Double(), server_default=sa.text("0"), nullable=False),
    )
    op.add_column(
        "queues",
        sa.Column(
            "rate_refilled_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
    )
    op.add_column("queues", sa.Column("rate_limit_set_by", sa.Text(), nullable=True))
    op.create_check_constraint(op.f("queues_rate_limit_check"), "queues", "rate_limit > 0")
    op.create_check_constraint(
        op.f("queues_rate_period_seconds_check"),
        "queues",
        "rate_period_seconds > 0::double precision",
    )
    _audit_actions(AUDIT_ACTIONS + NEW_AUDIT_ACTIONS)
    with op.get_context().autocommit_block():
        op.execute(TENANT_INDEX)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY jobs_claim_tenant_idx")
    op.execute(
        sa.text("DELETE FROM audit_log WHERE action IN :actions").bindparams(
            sa.bindparam("actions", NEW_AUDIT_ACTIONS, expanding=True)
        )
    )
    _audit_actions(AUDIT_ACTIONS)
    for column in (
        "rate_limit_set_by",
        "rate_refilled_at",
        "rate_tokens",
        "rate_period_seconds",
        "rate_limit",
    ):
        op.drop_column("queues", column)
    op.drop_column("workers", "abandoned_threads")
    op.execute("DELETE FROM job_attempts WHERE outcome IN ('timed_out', 'cancelled')")
    op.drop_constraint(op.f(OUTCOME_CHECK), "job_attempts", type_="check")
    op.create_check_constraint(op.f(OUTCOME_CHECK), "job_attempts", OUTCOMES_BEFORE)
    op.drop_column("jobs", "cancel_requested_at")
    op.drop_column("jobs", "timeout_seconds")


def _audit_actions(actions: tuple[str, ...]) -> None:
    listed = ", ".join(f"'{action}'" for action in actions)
    op.drop_constraint(op.f("audit_log_action_check"), "audit_log", type_="check")
    op.create_check_constraint(op.f("audit_log_action_check"), "audit_log", f"action IN ({listed})")
