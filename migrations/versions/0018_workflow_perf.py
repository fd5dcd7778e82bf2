"""Workflow waits that many executions hold at once: the console's "waiting on what" filter and
its "oldest waiting" answer from indexes instead of reading every open wait.

- ``workflow_waits_open_on_idx`` on ``(coalesce(key, 'sleep'), execution_id) WHERE
  satisfied_at IS NULL``: the executions list filtered by what they wait for walks this index
  newest first and stops at the page's end (the expression is the list query's own).
- ``workflow_waits_open_since_idx`` on ``(created_at) WHERE satisfied_at IS NULL``: the
  overview's oldest open wait is the first entry.

Revision ID: 0018_workflow_perf
Revises: 0017_table_layout
Create Date: 2026-12-01
"""

from alembic import op

revision = "0018_workflow_perf"
down_revision = "0017_table_layout"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX workflow_waits_open_on_idx ON workflow_waits"
        " ((coalesce(key, 'sleep')), execution_id) WHERE satisfied_at IS NULL"
    )
    op.execute(
        "CREATE INDEX workflow_waits_open_since_idx ON workflow_waits (created_at)"
        " WHERE satisfied_at IS NULL"
    )


def downgrade() -> None:
    op.drop_index("workflow_waits_open_since_idx", table_name="workflow_waits")
    op.drop_index("workflow_waits_open_on_idx", table_name="workflow_waits")
