"""jobs_after_insert() does its work in one statement instead of one per step.

The function of 0021 ran up to five statements of its own for an INSERT: the statement's
tenants, their lock, the queues (one loop query), and per queue an insert into ``queues`` and a
notification. Each is a query that PL/pgSQL plans once and then starts and ends at every call:
for a one-job insert (one transaction each) the function took 100 of its 462 µs, measured
against a function that does nothing. This one reads the transition table once, and locks the
tenants, creates the missing queues (looked up first: an insert that conflicts costs more than
the look-up) and sends the notifications in the same statement: 36 µs (``python -m
bench.hot_statements --only insert_trigger``: 2,163 -> 2,514 jobs/s, the floor 2,765; 1,000-job
inserts unchanged). Only a refusal (a tenant that does not exist) runs a second statement, to
name the tenant. What it does is unchanged: the same lock, the same error
(``foreign_key_violation``, constraint ``jobs_tenant_check``), one notification per queue with a
job visible now, a rolled-back statement leaving neither queue rows nor notifications.

Revision ID: 0022_insert_trigger
Revises: 0021_tenant_check
Create Date: 2026-12-02
"""

import importlib.util
from pathlib import Path
from types import ModuleType

from alembic import op

revision = "0022_insert_trigger"
down_revision = "0021_tenant_check"
branch_labels = None
depends_on = None

AFTER_INSERT = """
CREATE OR REPLACE FUNCTION jobs_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    wanted integer;
    found integer;
    missing bigint;
BEGIN
    -- jobs_tenant_check: every tenant of the statement's jobs exists, and stays until commit.
    WITH statement_jobs AS MATERIALIZED (
        SELECT tenant_id, queue, bool_or(available_at <= now()) AS visible
        FROM new_jobs
        GROUP BY tenant_id, queue
    ), locked AS (
        SELECT id FROM tenants
        WHERE id IN (SELECT tenant_id FROM statement_jobs)
        FOR KEY SHARE
    ), named AS (
        INSERT INTO queues (name)
        SELECT DISTINCT queue FROM statement_jobs
        WHERE NOT EXISTS (SELECT FROM queues WHERE queues.name = statement_jobs.queue)
        ON CONFLICT (name) DO NOTHING
    )
    SELECT (SELECT count(DISTINCT tenant_id) FROM statement_jobs),
           (SELECT count(*) FROM locked),
           (SELECT count(pg_notify('pauta_jobs', queue))
            FROM (SELECT DISTINCT queue FROM statement_jobs WHERE visible) AS visible_queues)
    INTO wanted, found;
    IF found < wanted THEN
        SELECT min(tenant) INTO missing
        FROM (SELECT DISTINCT tenant_id AS tenant FROM new_jobs) AS statement_tenants
        WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE id = tenant);
        RAISE foreign_key_violation USING
            MESSAGE = format('insert on table "jobs" violates the tenant check: '
                             'there is no tenant %s', missing),
            CONSTRAINT = 'jobs_tenant_check', TABLE = 'jobs';
    END IF;
    RETURN NULL;
END;
$$;
"""


def _revision_0021() -> ModuleType:
    """The revision before, whose function the downgrade puts back."""
    path = Path(__file__).with_name("0021_tenant_check.py")
    spec = importlib.util.spec_from_file_location("pauta_revision_0021", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def upgrade() -> None:
    op.execute(AFTER_INSERT)


def downgrade() -> None:
    op.execute(_revision_0021().AFTER_INSERT)
