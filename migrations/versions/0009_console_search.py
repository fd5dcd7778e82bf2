"""Console search: the job list's "Error contains" filter served by a trigram index.

``jobs_error_search_idx`` is a GIN index of ``last_error`` with ``gin_trgm_ops`` (the ``pg_trgm``
extension), so ``last_error ILIKE '%text%'`` finds a rare error among millions of finished jobs
by the index instead of walking them. It holds only rows that have an error (most succeeded jobs
have none), so the hot path pays nothing for a job that never failed. Built ``CONCURRENTLY``:
writes go on while it builds.

``pg_trgm`` ships with PostgreSQL's contrib modules and is a trusted extension (any role that may
create objects in the database can install it), but a server built without contrib lacks it (the
embedded PostgreSQL of ``pgserver`` that ``make run`` starts is one). There the migration creates
neither, and the console bounds the search instead, saying so on the page.

The payload filter has no index: a GIN index of ``payload`` would take an entry on every enqueue,
claim and finish of every job, which the engine's throughput would pay for; the console bounds
that search instead.

Revision ID: 0009_console_search
Revises: 0008_leadership
Create Date: 2026-12-01
"""

from alembic import op
from sqlalchemy import text

revision = "0009_console_search"
down_revision = "0008_leadership"
branch_labels = None
depends_on = None

INDEX = "jobs_error_search_idx"


def upgrade() -> None:
    available = op.get_bind().execute(
        text("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
    )
    if available.first() is None:
        return
    op.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    with op.get_context().autocommit_block():
        op.execute(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON jobs"
            " USING gin (last_error gin_trgm_ops) WHERE last_error IS NOT NULL"
        )


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
