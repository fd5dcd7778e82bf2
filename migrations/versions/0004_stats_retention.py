"""Stats retention: index the minute of the per-minute tables (graph windows and pruning read
by it) and let a tenant's stats go with the tenant.

Revision ID: 0004_stats_retention
Revises: 0003_people_and_cycles
Create Date: 2026-11-30
"""

from alembic import op

revision = "0004_stats_retention"
down_revision = "0003_people_and_cycles"
branch_labels = None
depends_on = None

TABLES = ("job_stats_minute", "queue_depth_minute")


def upgrade() -> None:
    for table in TABLES:
        op.create_index(f"{table}_minute_idx", table, ["minute"])
        op.drop_constraint(f"{table}_tenant_id_fkey", table, type_="foreignkey")
        op.create_foreign_key(
            f"{table}_tenant_id_fkey", table, "tenants", ["tenant_id"], ["id"], ondelete="CASCADE"
        )


def downgrade() -> None:
    for table in TABLES:
        op.drop_constraint(f"{table}_tenant_id_fkey", table, type_="foreignkey")
        op.create_foreign_key(f"{table}_tenant_id_fkey", table, "tenants", ["tenant_id"], ["id"])
        op.drop_index(f"{table}_minute_idx", table_name=table)
