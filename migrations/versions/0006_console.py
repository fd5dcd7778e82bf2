"""Console: the audit log, the tenant carried in the waiting and dead jobs' indexes, and dead
jobs indexed by the fingerprint of their error.

- ``audit_log``: one row per console action (who, when, what, which target, for which tenant).
- ``job_error_pattern(text)`` and ``jobs_dead_fingerprint_idx``: the failures pages group dead
  jobs by task and error pattern; the partial index (dead rows only) holds each one's group.
- ``jobs_claim_idx`` and ``jobs_dead_idx`` gain ``INCLUDE (tenant_id)``: the console counts
  waiting, scheduled and dead jobs per queue, filtered by tenant, with index-only scans of these
  two partial indexes instead of visiting a heap row per job. Neither index gains a key column,
  so the claim's order and probes are unchanged; ``tenant_id`` never changes, so no update that
  was HOT becomes non-HOT. Each is rebuilt under a new name ``CONCURRENTLY`` (writes go on while
  it builds), then the old one is dropped the same way and the new one renamed.

Revision ID: 0006_console
Revises: 0005_telemetry
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0006_console"
down_revision = "0005_telemetry"
branch_labels = None
depends_on = None

# (name, key columns, predicate) of the two indexes that gain INCLUDE (tenant_id).
INDEXES = (
    ("jobs_claim_idx", ["queue", "priority", "available_at", "id"], "state = 'available'"),
    ("jobs_dead_idx", ["queue", "finished_at"], "state = 'dead'"),
)
ACTIONS = (
    "job.requeue",
    "job.cancel",
    "job.run_now",
    "job.discard",
    "queue.pause",
    "queue.resume",
    "worker.drain",
)
TARGETS = ("job", "failure_group", "queue", "worker")

# The console groups dead jobs by task and this pattern of their last error: its first line, at
# most 300 characters, with e-mail addresses, every word of hex digits that holds a digit (an
# id, a worker's name suffix) and every other run of digits blanked, so "job 17 timed out" and
# "job 42 timed out" fall together. IMMUTABLE, so an expression index could use it one day.
ERROR_PATTERN_FUNCTION = r"""
CREATE FUNCTION job_error_pattern(error text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN regexp_replace(
    regexp_replace(
        regexp_replace(
            left(split_part(coalesce(error, ''), E'\n', 1), 300), '\S+@\S+', '<email>', 'g'
        ),
        '\m[0-9A-Fa-f]*[0-9][0-9A-Fa-f]*\M', '#', 'g'
    ),
    '[0-9]+', '#', 'g'
)
"""


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


# Every dead job's fingerprint, for the failures pages: a group's jobs are one range of it, and
# the list walks its distinct values. Only dead rows are in it, so the hot path (claim, finish)
# never touches it; a job that dies adds one entry (and one evaluation of the pattern).
FINGERPRINT_INDEX = (
    "CREATE INDEX CONCURRENTLY jobs_dead_fingerprint_idx ON jobs"
    " ((md5(task || E'\\n' || job_error_pattern(last_error))), id) WHERE state = 'dead'"
)


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=True),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("target_type", sa.Text(), nullable=False),
        sa.Column("target_id", sa.Text(), nullable=False),
        sa.Column("affected", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "details",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.CheckConstraint(_one_of("action", ACTIONS), name=op.f("audit_log_action_check")),
        sa.CheckConstraint(
            _one_of("target_type", TARGETS), name=op.f("audit_log_target_type_check")
        ),
        sa.CheckConstraint("affected >= 0", name=op.f("audit_log_affected_check")),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("audit_log_user_id_fkey")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("audit_log_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("audit_log_pkey")),
    )
    op.create_index("audit_log_tenant_id_id_idx", "audit_log", ["tenant_id", "id"])
    op.execute(ERROR_PATTERN_FUNCTION)
    _rebuild_indexes(include=["tenant_id"])
    with op.get_context().autocommit_block():
        op.execute(FINGERPRINT_INDEX)


def downgrade() -> None:
    with op.get_context().autocommit_block():
        op.execute("DROP INDEX CONCURRENTLY jobs_dead_fingerprint_idx")
    _rebuild_indexes(include=[])
    op.execute("DROP FUNCTION job_error_pattern(text)")
    op.drop_index("audit_log_tenant_id_id_idx", table_name="audit_log")
    op.drop_table("audit_log")


def _rebuild_indexes(include: list[str]) -> None:
    """Swap each index for one with ``include``, without blocking writes to ``jobs``."""
    with op.get_context().autocommit_block():
        for name, columns, predicate in INDEXES:
            op.create_index(
                f"{name}_next",
                "jobs",
                columns,
                postgresql_where=sa.text(predicate),
                postgresql_include=include,
                postgresql_concurrently=True,
            )
            op.drop_index(name, table_name="jobs", postgresql_concurrently=True)
            op.execute(f"ALTER INDEX {name}_next RENAME TO {name}")
