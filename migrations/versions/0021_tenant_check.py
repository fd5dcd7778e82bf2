"""The tenant of a job is checked once per statement instead of once per row.

``jobs_tenant_id_fkey`` checked every inserted row on its own (an index probe and a row lock
on ``tenants`` each), and, since the partitioned layout, every row a finish, a release or a
rescue moved from ``jobs_live`` to a history partition too (PostgreSQL runs a cross-partition
update as a delete and an insert, and the insert's foreign key check with it): about a third of
a bulk enqueue's server time and a seventh of a finish's, for tenants that a batch mostly
shares. It is replaced by the same guarantee, enforced by triggers:

- ``jobs_after_insert`` (the statement trigger that already wakes the workers) locks the
  statement's distinct tenants ``FOR KEY SHARE``, as the foreign key did row by row, and
  refuses the statement (``foreign_key_violation``, constraint ``jobs_tenant_check``) when one
  of them does not exist;
- ``jobs_tenant_changed``: an update that changes a job's tenant checks the new one the same
  way (no engine statement changes it; a row moved between partitions keeps its tenant);
- ``tenants_referenced_by_jobs``: deleting a tenant is refused while a job of any state
  references it, under ``READ COMMITTED`` only (its check must see what committed while it
  waited for the tenant's row; a foreign key gets that from a snapshot of its own); ``TRUNCATE
  tenants`` is refused while ``jobs`` holds rows. A tenant's id never changes (``GENERATED
  ALWAYS``: an UPDATE can only set it to its default, a new id).

Revision ID: 0021_tenant_check
Revises: 0020_pair_copy_out
Create Date: 2026-12-02
"""

from alembic import op

revision = "0021_tenant_check"
down_revision = "0020_pair_copy_out"
branch_labels = None
depends_on = None

# jobs_after_insert() as 0001_engine wrote it, which the check goes before: each queue of the
# statement gets its row, and a notification when a job of it is visible now.
WAKE_QUEUES = """
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
"""

AFTER_INSERT = (
    """
CREATE OR REPLACE FUNCTION jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    queue_name text;
    visible boolean;
    wanted bigint[];
    found integer;
    missing bigint;
BEGIN
    -- jobs_tenant_check: every tenant of the statement's jobs exists, and stays until commit.
    SELECT array_agg(DISTINCT tenant_id) INTO wanted FROM new_jobs;
    IF wanted IS NOT NULL THEN
        SELECT count(*) INTO found
        FROM (SELECT 1 FROM tenants WHERE id = ANY (wanted) FOR KEY SHARE) AS locked;
        IF found < cardinality(wanted) THEN
            SELECT min(tenant) INTO missing
            FROM unnest(wanted) AS tenant
            WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE id = tenant);
            RAISE foreign_key_violation USING
                MESSAGE = format('insert on table "jobs" violates the tenant check: '
                                 'there is no tenant %s', missing),
                CONSTRAINT = 'jobs_tenant_check', TABLE = 'jobs';
        END IF;
    END IF;
"""  # noqa: S608 - two constant texts of this file
    + WAKE_QUEUES
)

TENANT_TRIGGERS = """
CREATE FUNCTION jobs_tenant_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM tenants WHERE id = NEW.tenant_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('update on table "jobs" violates the tenant check: '
                             'there is no tenant %s', NEW.tenant_id),
            CONSTRAINT = 'jobs_tenant_check', TABLE = 'jobs';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_tenant_changed
BEFORE UPDATE OF tenant_id ON jobs
FOR EACH ROW WHEN (OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
EXECUTE FUNCTION jobs_tenant_changed();

CREATE FUNCTION tenants_referenced_by_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        IF EXISTS (SELECT 1 FROM jobs) THEN
            RAISE foreign_key_violation USING
                MESSAGE = 'cannot truncate table "tenants": jobs reference its tenants',
                CONSTRAINT = 'jobs_tenant_check', TABLE = 'tenants';
        END IF;
        RETURN NULL;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE object_not_in_prerequisite_state USING
            MESSAGE = format('tenant %s: delete a tenant under READ COMMITTED (the check that '
                             'no job references it must see the latest jobs)', OLD.id);
    END IF;
    -- The row is locked by now (a BEFORE trigger runs on the locked, latest version): an
    -- enqueue that locked the tenant first has committed, and this statement sees its jobs.
    IF EXISTS (SELECT 1 FROM jobs WHERE tenant_id = OLD.id) THEN
        RAISE foreign_key_violation USING
            MESSAGE = format('delete on table "tenants" violates the tenant check: jobs still '
                             'reference tenant %s', OLD.id),
            CONSTRAINT = 'jobs_tenant_check', TABLE = 'tenants';
    END IF;
    RETURN OLD;
END;
$$;

CREATE TRIGGER tenants_deleted_referenced_by_jobs
BEFORE DELETE ON tenants
FOR EACH ROW EXECUTE FUNCTION tenants_referenced_by_jobs();

CREATE TRIGGER tenants_truncated_referenced_by_jobs
BEFORE TRUNCATE ON tenants
FOR EACH STATEMENT EXECUTE FUNCTION tenants_referenced_by_jobs();
"""

AFTER_INSERT_BEFORE = (
    """
CREATE OR REPLACE FUNCTION jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    queue_name text;
    visible boolean;
BEGIN"""
    + WAKE_QUEUES
)


def upgrade() -> None:
    op.execute("ALTER TABLE jobs DROP CONSTRAINT jobs_tenant_id_fkey")
    op.execute(AFTER_INSERT)
    op.execute(TENANT_TRIGGERS)


def downgrade() -> None:
    op.execute("DROP TRIGGER tenants_truncated_referenced_by_jobs ON tenants")
    op.execute("DROP TRIGGER tenants_deleted_referenced_by_jobs ON tenants")
    op.execute("DROP FUNCTION tenants_referenced_by_jobs()")
    op.execute("DROP TRIGGER jobs_tenant_changed ON jobs")
    op.execute("DROP FUNCTION jobs_tenant_changed()")
    op.execute(AFTER_INSERT_BEFORE)
    op.execute(
        "ALTER TABLE jobs ADD CONSTRAINT jobs_tenant_id_fkey"
        " FOREIGN KEY (tenant_id) REFERENCES tenants (id)"
    )
