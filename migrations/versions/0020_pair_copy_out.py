"""History partitions: an expired period's attempts are sorted out against its own jobs'
partition, not against every job id there is.

Before (0019_history_pairs), dropping an attempts partition kept the attempts of the jobs that
outlive it by looking each one up in ``jobs_live``, ``jobs_dead`` and every ``jobs_done``
partition (ids up to the partition's newest job), under the SHARE lock on ``jobs`` that holds
every writer back: the longer the history, the longer the stall. Now the jobs' partition and
the attempts' partition of one period go together, and what the drop keeps of the attempts is
what its own jobs' partition does not hold (an attempt finishes no later than its job, so a
job of the period is either there or outlives it). That reads the two partitions of the period
and nothing else.

The attempts copied out to ``job_attempts_default`` earlier (a retried job's first attempt, say,
whose job finished a period later) go when their job's partition goes, looked up by the
partition's job ids; before, they waited for the delete-based prune's orphan sweep, which
looked every attempt of the default up in every partition of ``jobs`` on each round. Pairs go
in order and a busy pair ends the round, so no later pair outruns an earlier one. An expired
attempts partition without a jobs partition of its name (left by an older version, or by a
change of ``history_partition_seconds``) is copied out as before.

The writers' lock is taken on ``jobs`` alone (``LOCK TABLE ONLY``). Taken with its partitions
(0019), the request waited for any vacuum or analyze of one of them (SHARE UPDATE EXCLUSIVE
conflicts with SHARE) for up to the 500 ms lock timeout, and every claim, finish and enqueue
queued behind the waiting request: an enqueue waited 0.42 s behind an upkeep round held up by a
lock like autovacuum's on ``jobs_dead``, and the round then did nothing. Writers that name
``jobs`` take it first; the ones that name a partition (the unique enqueue's ``jobs_live``, the
prune's ``jobs_dead``) never touch the history partitions this DDL locks.

Revision ID: 0020_pair_copy_out
Revises: 0019_history_pairs
Create Date: 2026-12-02
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0020_pair_copy_out"
down_revision = "0019_history_pairs"
branch_labels = None
depends_on = None

HISTORY_PARTITIONS = """
CREATE OR REPLACE FUNCTION history_partitions(period_seconds float8, keep_seconds float8,
                                              from_at timestamptz, until_at timestamptz)
RETURNS TABLE (action text, partition text) LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    start_at timestamptz;
    part_name text;
    attempts_name text;
    with_attempts boolean;
    upper_at timestamptz;
    storage CONSTANT text :=
        'WITH (autovacuum_vacuum_insert_threshold = -1, autovacuum_vacuum_scale_factor = 0.05)';
BEGIN
    PERFORM set_config('lock_timeout', '500ms', true);
    -- before any partition: the writers take jobs first, so no lock is held while waiting. Only
    -- the parent: with its partitions, the request also waited for any (auto)vacuum or analyze
    -- of one of them (SHARE UPDATE EXCLUSIVE), and every writer queued behind it meanwhile.
    BEGIN
        LOCK TABLE ONLY jobs IN SHARE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN;  -- writers busy past the lock timeout: the next round
    END;
    FOREACH parent IN ARRAY ARRAY['jobs_done', 'job_attempts'] LOOP
        start_at := to_timestamp(floor(extract(epoch FROM from_at) / period_seconds)
                                 * period_seconds);
        WHILE start_at < until_at LOOP
            part_name := parent || '_'
                         || to_char(start_at AT TIME ZONE 'UTC', 'YYYYMMDD"t"HH24MISS');
            IF to_regclass(part_name) IS NULL THEN
                BEGIN
                    EXECUTE format('CREATE TABLE %I PARTITION OF %I'
                                   ' FOR VALUES FROM (%L) TO (%L) %s', part_name, parent, start_at,
                                   start_at + make_interval(secs => period_seconds), storage);
                    action := 'created'; partition := part_name; RETURN NEXT;
                EXCEPTION WHEN check_violation OR invalid_object_definition
                               OR lock_not_available THEN
                    NULL;  -- rows of that period in the default, an overlap, or busy: skip
                END;
            END IF;
            start_at := start_at + make_interval(secs => period_seconds);
        END LOOP;
    END LOOP;
    -- Expired periods, oldest first: the jobs' partition with the attempts' of its period.
    FOR part_name, upper_at IN
        SELECT child.relname,
               substring(pg_get_expr(child.relpartbound, child.oid)
                         FROM 'TO \\(''([^'']+)''\\)')::timestamptz
        FROM pg_inherits JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
        WHERE pg_inherits.inhparent = 'jobs_done'::regclass
          AND pg_get_expr(child.relpartbound, child.oid) <> 'DEFAULT'
        ORDER BY 2
    LOOP
        EXIT WHEN upper_at > now() - make_interval(secs => keep_seconds);
        attempts_name := 'job_attempts' || substring(part_name FROM 10);
        with_attempts := to_regclass(attempts_name) IS NOT NULL;
        BEGIN
            -- its jobs' attempts copied out when an earlier period went
            EXECUTE format('DELETE FROM job_attempts_default AS a USING %I AS j'
                           ' WHERE a.job_id = j.id', part_name);
            IF with_attempts THEN
                -- detached first, so the attempts copied out land in the default
                EXECUTE format('ALTER TABLE job_attempts DETACH PARTITION %I', attempts_name);
                -- an attempt finishes no later than its job: a job of the period not in its
                -- jobs' partition outlives it (retried, dead, requeued)
                EXECUTE format('INSERT INTO job_attempts SELECT a.* FROM %I AS a'
                               ' WHERE NOT EXISTS (SELECT FROM %I AS j WHERE j.id = a.job_id)',
                               attempts_name, part_name);
                EXECUTE format('DROP TABLE %I', attempts_name);
            END IF;
            EXECUTE format('DROP TABLE %I', part_name);
        EXCEPTION WHEN lock_not_available THEN
            RETURN;  -- busy, and all of the pair undone: the next round goes on from it
        END;
        IF with_attempts THEN
            action := 'dropped'; partition := attempts_name; RETURN NEXT;
        END IF;
        action := 'dropped'; partition := part_name; RETURN NEXT;
    END LOOP;
    -- Expired attempts partitions with no jobs' partition of their name: every job id looked up.
    FOR part_name, upper_at IN
        SELECT child.relname,
               substring(pg_get_expr(child.relpartbound, child.oid)
                         FROM 'TO \\(''([^'']+)''\\)')::timestamptz
        FROM pg_inherits JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
        WHERE pg_inherits.inhparent = 'job_attempts'::regclass
          AND pg_get_expr(child.relpartbound, child.oid) <> 'DEFAULT'
        ORDER BY 2
    LOOP
        EXIT WHEN upper_at > now() - make_interval(secs => keep_seconds);
        CONTINUE WHEN to_regclass('jobs_done' || substring(part_name FROM 13)) IS NOT NULL;
        BEGIN
            EXECUTE format('ALTER TABLE job_attempts DETACH PARTITION %I', part_name);
            EXECUTE format('INSERT INTO job_attempts SELECT a.* FROM %I AS a'
                           ' WHERE a.job_id IN (SELECT id FROM jobs_live'
                           ' UNION ALL SELECT id FROM jobs_dead'
                           ' UNION ALL SELECT id FROM jobs_done'
                           ' WHERE id <= (SELECT max(job_id) FROM %I))',
                           part_name, part_name);
            EXECUTE format('DROP TABLE %I', part_name);
            action := 'dropped'; partition := part_name; RETURN NEXT;
        EXCEPTION WHEN lock_not_available THEN
            RETURN;
        END;
    END LOOP;
END;
$$
"""


def _function_of_0019() -> str:
    path = Path(__file__).with_name("0019_history_pairs.py")
    spec = importlib.util.spec_from_file_location("history_pairs_0019", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.history_partitions())


def upgrade() -> None:
    op.execute(HISTORY_PARTITIONS)


def downgrade() -> None:
    op.execute(_function_of_0019())
