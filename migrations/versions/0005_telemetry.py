"""Telemetry: the enqueuing span's W3C trace context on jobs, each attempt's trace id.

Revision ID: 0005_telemetry
Revises: 0004_stats_retention
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0005_telemetry"
down_revision = "0004_stats_retention"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("trace_context", postgresql.JSONB(), nullable=True))
    op.add_column("job_attempts", sa.Column("trace_id", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("job_attempts", "trace_id")
    op.drop_column("jobs", "trace_context")
