"""Leadership as a lease row: who leads the maintenance duties, in which term, until when.

A session advisory lock is held for as long as its connection lives, so a leader frozen whole
(SIGSTOP, a VM pause) kept it forever and stalled every duty it held. A row with an expiry that
the leader renews, taken over by anyone once it has expired, cannot be held by a process that
no longer runs; the term fences the leader-only writes of a leader that wakes up late.

Revision ID: 0008_leadership
Revises: 0007_running_fence
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0008_leadership"
down_revision = "0007_running_fence"
branch_labels = None
depends_on = None

TIMESTAMPTZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "leaders",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("holder", sa.Text(), nullable=False),
        sa.Column("term", sa.BigInteger(), nullable=False),
        sa.Column("elected_at", TIMESTAMPTZ, nullable=False),
        sa.Column("renewed_at", TIMESTAMPTZ, nullable=False),
        sa.Column("expires_at", TIMESTAMPTZ, nullable=False),
        sa.CheckConstraint("term > 0", name=op.f("leaders_term_check")),
        sa.PrimaryKeyConstraint("name", name=op.f("leaders_pkey")),
    )


def downgrade() -> None:
    op.drop_table("leaders")
