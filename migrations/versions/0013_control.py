"""Keeping work in bounds: a per-job timeout, the 'timed_out' attempt outcome, the count of
threads a worker process abandoned to a task that overran its timeout, and the request to cancel
a running job (with the 'cancelled' attempt outcome); and the index of the claim that shares a
queue fairly between tenants (built CONCURRENTLY: writes to jobs go on meanwhile).

Revision ID: 0013_control
Revises: 0011_login_throttle
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0013_control"
down_revision = "0011_login_throttle"
branch_labels = None
depends_on = None

OUTCOME_CHECK = "job_attempts_outcome_check"
# The full list, old and new (a CHECK constraint is replaced whole).
OUTCOMES_BEFORE = "outcome IN ('succeeded', 'failed', 'lease_expired', 'released')"
OUTCOMES_AFTER = (
    "outcome IN ('succeeded', 'failed', 'lease_expired', 'released', 'timed_out', 'cancelled')"
)


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
    with op.get_context().autocommit_block():
        op.execute(TENANT_INDEX)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY jobs_claim_tenant_idx")
    op.drop_column("workers", "abandoned_threads")
    op.execute("DELETE FROM job_attempts WHERE outcome IN ('timed_out', 'cancelled')")
    op.drop_constraint(op.f(OUTCOME_CHECK), "job_attempts", type_="check")
    op.create_check_constraint(op.f(OUTCOME_CHECK), "job_attempts", OUTCOMES_BEFORE)
    op.drop_column("jobs", "cancel_requested_at")
    op.drop_column("jobs", "timeout_seconds")
