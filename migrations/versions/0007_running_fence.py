"""Tighten the running check: a job has an owner if and only if it is running, and a lease if
and only if it is running. The fenced writes (job_finish, job_release, job_extend_leases) find
a worker's rows by (id, attempt, locked_by) alone and rely on this.

Revision ID: 0007_running_fence
Revises: 0006_console
Create Date: 2026-11-30
"""

from alembic import op

revision = "0007_running_fence"
down_revision = "0006_console"
branch_labels = None
depends_on = None

NAME = "jobs_running_has_lease_check"
BEFORE = "(state = 'running') = (locked_by IS NOT NULL AND lease_expires_at IS NOT NULL)"
AFTER = (
    "(state = 'running') = (locked_by IS NOT NULL)"
    " AND (state = 'running') = (lease_expires_at IS NOT NULL)"
)


def upgrade() -> None:
    op.drop_constraint(op.f(NAME), "jobs", type_="check")
    op.create_check_constraint(op.f(NAME), "jobs", AFTER)


def downgrade() -> None:
    op.drop_constraint(op.f(NAME), "jobs", type_="check")
    op.create_check_constraint(op.f(NAME), "jobs", BEFORE)
