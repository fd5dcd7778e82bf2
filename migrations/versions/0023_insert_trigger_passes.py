"""jobs_after_insert() makes one pass per tenant and queue of the statement's jobs.

0022 did the function's work in one statement: the statement's (tenant, queue) pairs in a
MATERIALIZED CTE, the tenants' lock, the missing queues' insert and the notifications in CTEs
and subqueries around it. For a one-job insert, the most common (one transaction each), that
statement's many nodes cost more to start and end than the work in them: this function reads
the pairs once, and for each locks its tenant (a look-up by primary key), looks its queue up
(inserting it only when missing) and sends its notification (a PL/pgSQL expression, not a
query). Measured with ``python -m bench.hot_statements --only insert_trigger`` (one-job
inserts, one transaction each; docs/benchmarks.md). A statement with many tenants and queues
makes as many passes: its 1,000-job figure is measured beside. What it does is unchanged: the
same lock, the same error (``foreign_key_violation``, constraint ``jobs_tenant_check``, naming
the lowest missing tenant), one notification per queue with a job visible now (PostgreSQL
sends a transaction's identical notifications once), a rolled-back statement leaving neither
queue rows nor notifications.

Revision ID: 0023_insert_trigger_passes
Revises: 0022_insert_trigger
Create Date: 2026-12-03
"""

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0023_insert_trigger_passes"
down_revision = "0022_insert_trigger"
branch_labels = None
depends_on = None

AFTER_INSERT = """
CREATE OR REPLACE FUNCTION jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    pair record;
BEGIN
    FOR pair IN
        SELECT tenant_id, queue, bool_or(available_at <= now()) AS visible
        FROM new_jobs
        GROUP BY tenant_id, queue
        ORDER BY tenant_id, queue
    LOOP
        -- jobs_tenant_check: the tenant exists, and stays until commit.
        PERFORM FROM tenants WHERE id = pair.tenant_id FOR KEY SHARE;
        IF NOT FOUND THEN
            RAISE foreign_key_violation USING
                MESSAGE = format('insert on table "jobs" violates the tenant check: '
                                 'there is no tenant %s', pair.tenant_id),
                CONSTRAINT = 'jobs_tenant_check', TABLE = 'jobs';
        END IF;
        -- looked up first: an insert that conflicts costs more than the look-up
        PERFORM FROM queues WHERE name = pair.queue;
        IF NOT FOUND THEN
            INSERT INTO queues (name) VALUES (pair.queue) ON CONFLICT (name) DO NOTHING;
        END IF;
        IF pair.visible THEN
            PERFORM pg_notify('pauta_jobs', pair.queue);
        END IF;
    END LOOP;
    RETURN NULL;
END;
$$;
"""


def _revision_0022() -> ModuleType:
    """The revision before, whose function the downgrade puts back."""
    path = Path(__file__).with_name("0022_insert_trigger.py")
    spec = importlib.util.spec_from_file_location("pauta_revision_0022", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    op.execute(AFTER_INSERT)


def downgrade() -> None:
    op.execute(_revision_0022().AFTER_INSERT)
