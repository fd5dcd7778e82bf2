"""Worker registry and the per-minute stats the console graphs read.

Revision ID: 0002_workers_and_stats
Revises: 0001_engine
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = "0002_workers_and_stats"
down_revision = "0001_engine"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("hostname", sa.Text(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("queue", sa.Text(), nullable=True),
        sa.Column("threads", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'running'"), nullable=False),
        sa.Column("in_flight", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "last_heartbeat_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("drain_requested_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("drain_requested_by", sa.Text(), nullable=True),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "state IN ('running', 'draining', 'stopped', 'lost')", name=op.f("workers_state_check")
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"], ["workers.id"], name=op.f("workers_parent_id_fkey"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("workers_pkey")),
        sa.UniqueConstraint("name", name=op.f("workers_name_key")),
    )
    op.create_index(
        "workers_live_idx",
        "workers",
        ["queue"],
        postgresql_where=sa.text("state IN ('running', 'draining')"),
    )

    op.create_table(
        "job_stats_minute",
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("succeeded", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("failed", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("dead", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("released", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("runtime_sum", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("runtime_max", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("wait_sum", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.Column("wait_max", sa.Double(), server_default=sa.text("0"), nullable=False),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("job_stats_minute_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("queue", "minute", "tenant_id", name=op.f("job_stats_minute_pkey")),
    )
    op.create_table(
        "queue_depth_minute",
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("minute", sa.DateTime(timezone=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("available", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("scheduled", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("running", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("dead", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("oldest_available_seconds", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("queue_depth_minute_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint(
            "queue", "minute", "tenant_id", name=op.f("queue_depth_minute_pkey")
        ),
    )


def downgrade() -> None:
    op.drop_table("queue_depth_minute")
    op.drop_table("job_stats_minute")
    op.drop_table("workers")
