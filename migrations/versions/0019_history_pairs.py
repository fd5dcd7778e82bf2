"""History partitions: no deadlock with the writers, and an attempts partition dropped only
after the jobs partition of the same period.

``history_partitions`` (0017_table_layout) took each partition's lock as it came to it, keeping
them to the end of its transaction, while a ``job_finish`` holds ``jobs`` and ``job_attempts``
and locks partitions as it plans and as it routes rows: the two waited on each other, and the
server's deadlock detector rolled the finish back (17 times in the 5,000,000-job soak's 15
minutes, with a partition every 2.5 s; each batch was retried and none lost). Now the function
first takes ``jobs`` in SHARE mode, which every writer of jobs and attempts takes first too (in
ROW EXCLUSIVE): it waits for the writers in flight, holds the new ones back for the few
milliseconds its DDL takes, and so never waits while holding what they need. Busy past the
lock timeout, the round is skipped.

``history_partitions`` (0017_table_layout) dropped each expired partition of ``jobs_done`` and
of ``job_attempts`` on its own, skipping one it could not lock within 500 ms. When the jobs'
partition was skipped and the attempts' was not, every attempt of the period still had its job,
so all of them were copied to ``job_attempts_default`` before the drop: in the 5,000,000-job
soak, with a partition every 2.5 s, the default held 406,000 attempts after 15 minutes and grew
by about 450 a second. Now an attempts partition waits, whole, until its jobs' partition is
gone; what it copies out is again only the attempts of jobs that outlive it (retried, dead,
requeued).

Revision ID: 0019_history_pairs
Revises: 0018_workflow_perf
Create Date: 2026-12-01
"""

import importlib.util
from pathlib import Path

from alembic import op

revision = "0019_history_pairs"
down_revision = "0018_workflow_perf"
branch_labels = None
depends_on = None


def _function_of_0017() -> str:
    path = Path(__file__).with_name("0017_table_layout.py")
    spec = importlib.util.spec_from_file_location("table_layout_0017", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return str(module.HISTORY_PARTITIONS).replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")


LOCK_STEP = """    PERFORM set_config('lock_timeout', '500ms', true);
"""
LOCKED_FIRST_STEP = """    PERFORM set_config('lock_timeout', '500ms', true);
    -- before any partition: the writers take jobs first, so no lock is held while waiting
    BEGIN
        LOCK TABLE jobs IN SHARE MODE;
    EXCEPTION WHEN lock_not_available THEN
        RETURN;  -- writers busy past the lock timeout: the next round
    END;
"""
DROP_STEP = """            EXIT WHEN upper_at > now() - make_interval(secs => keep_seconds);
            BEGIN"""
PAIRED_DROP_STEP = """            EXIT WHEN upper_at > now() - make_interval(secs => keep_seconds);
            -- an attempts partition goes after its jobs' partition of the same period (skipped
            -- this round if that one was busy), or all its attempts would be copied out
            CONTINUE WHEN parent = 'job_attempts'
                AND to_regclass('jobs_done' || substring(part_name FROM 13)) IS NOT NULL;
            BEGIN"""


def history_partitions() -> str:
    """This migration's CREATE OR REPLACE of the function (0020_pair_copy_out goes back to it)."""
    function = _function_of_0017()
    if function.count(DROP_STEP) != 1 or function.count(LOCK_STEP) != 1:
        raise RuntimeError("0017's history_partitions is not the one this migration changes")
    return function.replace(LOCK_STEP, LOCKED_FIRST_STEP).replace(DROP_STEP, PAIRED_DROP_STEP)


def upgrade() -> None:
    op.execute(history_partitions())


def downgrade() -> None:
    op.execute(_function_of_0017())
