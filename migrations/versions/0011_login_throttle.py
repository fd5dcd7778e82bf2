"""Login throttle: failed log-ins per account and per source address, in a table that every
gunicorn worker and every web host shares.

Revision ID: 0011_login_throttle
Revises: 0010_employee_import
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0011_login_throttle"
down_revision = "0010_employee_import"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_throttle",
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("window_ends_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "scope IN ('account', 'address')", name=op.f("login_throttle_scope_check")
        ),
        sa.CheckConstraint("failures >= 0", name=op.f("login_throttle_failures_check")),
        sa.PrimaryKeyConstraint("scope", "key", name=op.f("login_throttle_pkey")),
    )
    op.create_index("login_throttle_window_ends_at_idx", "login_throttle", ["window_ends_at"])


def downgrade() -> None:
    op.drop_table("login_throttle")
