"""Storage parameters for the tables that churn: the hot queue and the per-minute stats.

- ``jobs``: ``fillfactor = 90`` and ``autovacuum_vacuum_cost_delay = 0`` beside the scale
  factors of 0001. Its updates are never HOT (each changes ``state`` or the indexed
  ``lease_expires_at``), but PostgreSQL still puts a row's new version on the same page when
  there is room, so 10% free space keeps versions together and the heap from growing at every
  claim; vacuum of this table runs unthrottled, since what it removes is what the claim walks.
- ``job_stats_minute``: ``fillfactor = 70``. Each completer batch adds to its minute's row,
  changing only counters, which no index covers: with room on the page those updates are HOT and
  leave no index entries behind.

Revision ID: 0014_scale
Revises: 0015_locale
Create Date: 2026-12-01
"""

from alembic import op

revision = "0014_scale"
down_revision = "0016_privacy"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE jobs SET (fillfactor = 90, autovacuum_vacuum_cost_delay = 0)")
    op.execute("ALTER TABLE job_stats_minute SET (fillfactor = 70)")


def downgrade() -> None:
    op.execute("ALTER TABLE job_stats_minute RESET (fillfactor)")
    op.execute("ALTER TABLE jobs RESET (fillfactor, autovacuum_vacuum_cost_delay)")
