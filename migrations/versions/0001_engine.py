"""Engine: tenants, queues, jobs and job_attempts, with the insert trigger that wakes workers.

Revision ID: 0001_engine
Revises:
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001_engine"
down_revision = None
branch_labels = None
depends_on = None

TIMESTAMPTZ = sa.DateTime(timezone=True)

# jobs is a high-churn table: vacuum it often, so the claim index does not fill with entries of
# rows that have already moved on.
JOBS_STORAGE = {
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_vacuum_insert_scale_factor": "0.05",
    "autovacuum_analyze_scale_factor": "0.02",
}

# After each INSERT statement on jobs: register new queue names and NOTIFY, once per queue,
# the workers of queues that received jobs visible now. PostgreSQL delivers the notification
# at commit and drops it on rollback, so workers never wake for a job that does not exist.
JOBS_AFTER_INSERT = """
CREATE FUNCTION jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    queue_name text;
    visible boolean;
BEGIN
    FOR queue_name, visible IN
        SELECT queue, bool_or(available_at <= now()) FROM new_jobs GROUP BY queue
    LOOP
        INSERT INTO queues (name) VALUES (queue_name) ON CONFLICT (name) DO NOTHING;
        IF visible THEN
            PERFORM pg_notify('pauta_jobs', queue_name);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_after_insert
AFTER INSERT ON jobs
REFERENCING NEW TABLE AS new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION jobs_after_insert();
"""


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("slug", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("tenants_pkey")),
        sa.UniqueConstraint("slug", name=op.f("tenants_slug_key")),
    )
    op.execute("INSERT INTO tenants (slug, name) VALUES ('system', 'System')")

    op.create_table(
        "queues",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("paused_at", TIMESTAMPTZ, nullable=True),
        sa.Column("paused_by", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("queues_pkey")),
    )

    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'available'"), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("5"), nullable=False),
        sa.Column("available_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("started_at", TIMESTAMPTZ, nullable=True),
        sa.Column("finished_at", TIMESTAMPTZ, nullable=True),
        sa.Column("lease_expires_at", TIMESTAMPTZ, nullable=True),
        sa.Column("locked_by", sa.Text(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("unique_key", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "(state = 'running') = (locked_by IS NOT NULL AND lease_expires_at IS NOT NULL)",
            name=op.f("jobs_running_has_lease_check"),
        ),
        sa.CheckConstraint(
            "state IN ('available', 'running', 'succeeded', 'dead', 'cancelled')",
            name=op.f("jobs_state_check"),
        ),
        sa.CheckConstraint("max_attempts > 0", name=op.f("jobs_max_attempts_check")),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name=op.f("jobs_tenant_id_fkey")),
        sa.PrimaryKeyConstraint("id", name=op.f("jobs_pkey")),
        postgresql_with=JOBS_STORAGE,
    )
    op.create_index(
        "jobs_claim_idx",
        "jobs",
        ["queue", "priority", "available_at", "id"],
        postgresql_where=sa.text("state = 'available'"),
    )
    op.create_index(
        "jobs_lease_idx",
        "jobs",
        ["lease_expires_at"],
        postgresql_where=sa.text("state = 'running'"),
    )
    op.create_index(
        "jobs_finished_idx",
        "jobs",
        ["finished_at"],
        postgresql_where=sa.text("state IN ('succeeded', 'dead', 'cancelled')"),
    )
    op.create_index(
        "jobs_dead_idx",
        "jobs",
        ["queue", "finished_at"],
        postgresql_where=sa.text("state = 'dead'"),
    )
    op.create_index(
        "jobs_unique_key_idx",
        "jobs",
        ["tenant_id", "unique_key"],
        unique=True,
        postgresql_where=sa.text("unique_key IS NOT NULL AND state IN ('available', 'running')"),
    )
    op.execute(JOBS_AFTER_INSERT)

    op.create_table(
        "job_attempts",
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.Text(), nullable=False),
        sa.Column("started_at", TIMESTAMPTZ, nullable=False),
        sa.Column("finished_at", TIMESTAMPTZ, nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("traceback", sa.Text(), nullable=True),
        sa.Column("duration", postgresql.INTERVAL(), nullable=False),
        sa.CheckConstraint(
            "outcome IN ('succeeded', 'failed', 'lease_expired', 'released')",
            name=op.f("job_attempts_outcome_check"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("job_attempts_job_id_fkey"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "attempt", name=op.f("job_attempts_pkey")),
    )


def downgrade() -> None:
    op.drop_table("job_attempts")
    op.execute("DROP TRIGGER jobs_after_insert ON jobs")
    op.execute("DROP FUNCTION jobs_after_insert()")
    op.drop_table("jobs")
    op.drop_table("queues")
    op.drop_table("tenants")
