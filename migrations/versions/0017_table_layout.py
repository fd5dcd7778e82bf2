"""Table layout: the claim's table holds only live work; finished jobs live in partitions that
retention drops whole.

``jobs`` becomes a table partitioned by LIST (state):

- ``jobs_live`` (available, running): the only table the claim, the lease sweep and the finish
  touch. Its indexes are the claim's, the lease's and the unique key's;
- ``jobs_dead`` (dead): small, kept ``keep_dead_seconds``, pruned by DELETE;
- ``jobs_done`` (succeeded, cancelled), itself partitioned by RANGE (finished_at), one partition
  per ``history_partition_seconds`` (named ``jobs_done_<start, UTC>``), created ahead and dropped
  whole by the maintenance leader (``history_partitions``), and ``jobs_done_default`` for the
  stragglers (a finish past the partitions created, or a NULL finished_at).

``job_attempts`` is partitioned by RANGE (finished_at) in the same periods (``job_attempts_<start>``
and ``job_attempts_default``). Its foreign key to ``jobs`` cannot stay (``jobs.id`` is no longer
unique by constraint: a unique index of a partitioned table must hold the partition key; ids
come from the one sequence ``jobs_id_seq``, and every partition has an index on id). When an
attempt partition is dropped, the attempts of jobs that still exist (dead, running again, or
finished later) are first copied to ``job_attempts_default``, so a job's history lives as long as
the job.

The notification dedup indexes of 0003/0012 (``jobs_notify_reviewer_key``,
``jobs_remind_reviewer_key``, ``jobs_escalate_calibration_key``) spanned every state, which a
partitioned table's unique index cannot: they move, with the same names, to ``job_once_keys``,
which the row trigger ``jobs_once_key`` fills in the inserting statement. Its rows are not pruned
with the jobs, so the second reminder stays impossible after the first is finished and gone.

Revision ID: 0017_table_layout
Revises: 0014_scale
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0017_table_layout"
down_revision = "0014_scale"
branch_labels = None
depends_on = None

COLUMNS = """
    id bigint NOT NULL DEFAULT nextval('jobs_id_seq'),
    tenant_id bigint NOT NULL CONSTRAINT jobs_tenant_id_fkey REFERENCES tenants (id),
    queue text NOT NULL,
    task text NOT NULL,
    payload jsonb NOT NULL DEFAULT '{}'::jsonb,
    priority smallint NOT NULL DEFAULT 0,
    state text NOT NULL DEFAULT 'available',
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL DEFAULT 5,
    available_at timestamptz NOT NULL DEFAULT now(),
    created_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz,
    lease_expires_at timestamptz,
    locked_by text,
    last_error text,
    unique_key text,
    trace_context jsonb,
    timeout_seconds double precision,
    cancel_requested_at timestamptz,
    CONSTRAINT jobs_max_attempts_check CHECK (max_attempts > 0),
    CONSTRAINT jobs_running_has_lease_check CHECK (
        (state = 'running') = (locked_by IS NOT NULL)
        AND (state = 'running') = (lease_expires_at IS NOT NULL)),
    CONSTRAINT jobs_state_check
        CHECK (state IN ('available', 'running', 'succeeded', 'dead', 'cancelled')),
    CONSTRAINT jobs_timeout_seconds_check CHECK (timeout_seconds > 0::double precision)
"""

ATTEMPT_COLUMNS = """
    job_id bigint NOT NULL,
    attempt integer NOT NULL,
    worker text NOT NULL,
    started_at timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome text NOT NULL,
    error text,
    traceback text,
    duration interval NOT NULL,
    trace_id text,
    CONSTRAINT job_attempts_outcome_check CHECK (outcome IN
        ('succeeded', 'failed', 'lease_expired', 'released', 'timed_out', 'cancelled'))
"""

# Autovacuum per table (see docs/discussions/table-layout.md for the reasons):
# - jobs_live: small and rewritten all the time (claimed, extended, finished away): vacuumed by
#   a count of dead rows, not a fraction of a table whose size swings, unthrottled; 20% of each
#   page free so a claimed row's new version stays on its page.
# - jobs_dead: small, rarely written; a vacuum at 5% dead rows.
# - history partitions: append-only and dropped whole within days, before freezing matters:
#   insert-triggered vacuums would read each period's history for nothing.
LIVE_STORAGE = (
    "fillfactor = 80, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000,"
    " autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 2000,"
    " autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 2000,"
    " autovacuum_vacuum_cost_delay = 0"
)
DEAD_STORAGE = "autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.05"

NOTIFY_TRIGGER = """
CREATE TRIGGER jobs_after_insert
AFTER INSERT ON {table}
REFERENCING NEW TABLE AS new_jobs
FOR EACH STATEMENT EXECUTE FUNCTION jobs_after_insert()
"""

# The once-keys: one row per job of a deduplicated task, written by the inserting statement; a
# job moving between partitions (finished, requeued) fires the insert trigger again, and finds
# its own row.
ONCE_KEY = """
CREATE FUNCTION jobs_once_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM job_once_keys WHERE job_id = NEW.id) THEN
        INSERT INTO job_once_keys (job_id, tenant_id, task, payload)
        VALUES (NEW.id, NEW.tenant_id, NEW.task, NEW.payload);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER jobs_once_key
AFTER INSERT ON jobs
FOR EACH ROW WHEN (NEW.task IN ('hr.notify_reviewer', 'hr.remind_reviewer',
                                'hr.escalate_calibration'))
EXECUTE FUNCTION jobs_once_key();
"""
ONCE_INDEXES = (
    ("jobs_notify_reviewer_key", "hr.notify_reviewer",
     "tenant_id, task, (payload ->> 'cycle_id'), (payload ->> 'reviewer_id')"),
    ("jobs_remind_reviewer_key", "hr.remind_reviewer",
     "tenant_id, (payload ->> 'cycle_id'), (payload ->> 'reviewer_id'), (payload ->> 'round')"),
    ("jobs_escalate_calibration_key", "hr.escalate_calibration",
     "tenant_id, (payload ->> 'cycle_id'), (payload ->> 'user_id'), (payload ->> 'round')"),
)  # fmt: skip

# The leader's partition upkeep, one call per prune round (fenced by its term in job_history,
# jobqueue/queries.sql): partitions of jobs_done and job_attempts from the current period to
# `ahead_seconds` on; the partitions wholly older than `keep_seconds` dropped, an attempt
# partition after its surviving jobs' attempts were copied to job_attempts_default. A lock not
# granted within lock_timeout skips that partition until the next round; a period whose rows
# already sit in the default partition is left there. Returns what it did.
HISTORY_PARTITIONS = """
CREATE FUNCTION history_partitions(period_seconds float8, keep_seconds float8,
                                   from_at timestamptz, until_at timestamptz)
RETURNS TABLE (action text, partition text) LANGUAGE plpgsql AS $$
DECLARE
    parent text;
    start_at timestamptz;
    part_name text;
    upper_at timestamptz;
    storage CONSTANT text :=
        'WITH (autovacuum_vacuum_insert_threshold = -1, autovacuum_vacuum_scale_factor = 0.05)';
BEGIN
    PERFORM set_config('lock_timeout', '500ms', true);
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
        FOR part_name, upper_at IN
            SELECT child.relname,
                   substring(pg_get_expr(child.relpartbound, child.oid)
                             FROM 'TO \\(''([^'']+)''\\)')::timestamptz
            FROM pg_inherits JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
            WHERE pg_inherits.inhparent = parent::regclass
              AND pg_get_expr(child.relpartbound, child.oid) <> 'DEFAULT'
            ORDER BY 2
        LOOP
            EXIT WHEN upper_at > now() - make_interval(secs => keep_seconds);
            BEGIN
                IF parent = 'job_attempts' THEN
                    EXECUTE format('ALTER TABLE job_attempts DETACH PARTITION %I', part_name);
                    -- the jobs that can outlive it: live, dead, or finished since (their
                    -- ids no newer than its newest attempt's job); one pass over the partition
                    EXECUTE format('INSERT INTO job_attempts SELECT a.* FROM %I AS a'
                                   ' WHERE a.job_id IN (SELECT id FROM jobs_live'
                                   ' UNION ALL SELECT id FROM jobs_dead'
                                   ' UNION ALL SELECT id FROM jobs_done'
                                   ' WHERE id <= (SELECT max(job_id) FROM %I))',
                                   part_name, part_name);
                END IF;
                EXECUTE format('DROP TABLE %I', part_name);
                action := 'dropped'; partition := part_name; RETURN NEXT;
            EXCEPTION WHEN lock_not_available THEN
                NULL;  -- busy: the next round drops it
            END;
        END LOOP;
    END LOOP;
END;
$$
"""


def upgrade() -> None:
    bind = op.get_bind()
    trigram = bind.execute(sa.text("SELECT to_regclass('jobs_error_search_idx')")).scalar()
    op.execute("DROP TRIGGER jobs_after_insert ON jobs")
    op.execute("ALTER TABLE job_attempts DROP CONSTRAINT job_attempts_job_id_fkey")
    op.execute("ALTER TABLE jobs RENAME TO jobs_0014")
    op.execute("ALTER TABLE job_attempts RENAME TO job_attempts_0014")
    for index in ("jobs_pkey", "job_attempts_pkey", "jobs_notify_reviewer_key",
                  "jobs_remind_reviewer_key", "jobs_escalate_calibration_key",
                  "jobs_claim_idx", "jobs_claim_tenant_idx", "jobs_lease_idx",
                  "jobs_finished_idx", "jobs_dead_idx", "jobs_dead_fingerprint_idx",
                  "jobs_unique_key_idx", "jobs_error_search_idx"):  # fmt: skip
        op.execute(f"ALTER INDEX IF EXISTS {index} RENAME TO {index}_0014")
    # The ids go on from where they are: the old identity's sequence dies with its table.
    op.execute("CREATE SEQUENCE jobs_id_seq_0017 AS bigint")
    op.execute("SELECT setval('jobs_id_seq_0017', last_value, is_called) FROM jobs_id_seq")
    op.execute("ALTER SEQUENCE jobs_id_seq RENAME TO jobs_id_seq_0014")
    op.execute("ALTER SEQUENCE jobs_id_seq_0017 RENAME TO jobs_id_seq")

    op.execute(f"CREATE TABLE jobs ({COLUMNS}) PARTITION BY LIST (state)")
    op.execute("ALTER SEQUENCE jobs_id_seq OWNED BY jobs.id")
    op.execute(
        "CREATE TABLE jobs_live PARTITION OF jobs FOR VALUES IN ('available', 'running')"
        f" WITH ({LIVE_STORAGE})"
    )
    op.execute(
        f"CREATE TABLE jobs_dead PARTITION OF jobs FOR VALUES IN ('dead') WITH ({DEAD_STORAGE})"
    )
    op.execute(
        "CREATE TABLE jobs_done PARTITION OF jobs FOR VALUES IN ('succeeded', 'cancelled')"
        " PARTITION BY RANGE (finished_at)"
    )
    op.execute("CREATE TABLE jobs_done_default PARTITION OF jobs_done DEFAULT")
    op.execute(f"CREATE TABLE job_attempts ({ATTEMPT_COLUMNS}) PARTITION BY RANGE (finished_at)")
    op.execute("CREATE TABLE job_attempts_default PARTITION OF job_attempts DEFAULT")
    op.execute(HISTORY_PARTITIONS)
    # Hourly partitions (the default history_partition_seconds) from now on; the history
    # copied below lands in the defaults and goes by the DELETE-based prune, as it would have.
    # (A day of partitions back, 156 relations, doubled what it costs to copy a database.)
    op.execute("SELECT history_partitions(3600, 86400, now(), now() + interval '2 hours')")

    columns = (
        "id, tenant_id, queue, task, payload, priority, state, attempt, max_attempts, "
        "available_at, created_at, started_at, finished_at, lease_expires_at, locked_by, "
        "last_error, unique_key, trace_context, timeout_seconds, cancel_requested_at"
    )
    op.execute(f"INSERT INTO jobs ({columns}) SELECT {columns} FROM jobs_0014")  # noqa: S608
    op.execute("INSERT INTO job_attempts SELECT * FROM job_attempts_0014")

    op.execute("CREATE INDEX jobs_id_idx ON jobs (id)")
    op.execute("CREATE INDEX job_attempts_job_id_idx ON job_attempts (job_id, attempt)")
    op.execute(
        "CREATE INDEX jobs_claim_idx ON jobs_live (queue, priority, available_at, id)"
        " INCLUDE (tenant_id) WHERE state = 'available'"
    )
    op.execute(
        "CREATE INDEX jobs_claim_tenant_idx ON jobs_live"
        " (queue, tenant_id, priority, available_at, id) WHERE state = 'available'"
    )
    op.execute(
        "CREATE INDEX jobs_lease_idx ON jobs_live (lease_expires_at) WHERE state = 'running'"
    )
    op.execute(
        "CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs_live (tenant_id, unique_key)"
        " WHERE unique_key IS NOT NULL AND state IN ('available', 'running')"
    )
    op.execute(
        "CREATE INDEX jobs_dead_idx ON jobs_dead (queue, finished_at) INCLUDE (tenant_id)"
        " WHERE state = 'dead'"
    )
    op.execute(
        "CREATE INDEX jobs_dead_fingerprint_idx ON jobs_dead"
        " (md5(task || E'\\n' || job_error_pattern(last_error)), id) WHERE state = 'dead'"
    )
    op.execute("CREATE INDEX jobs_dead_finished_idx ON jobs_dead (finished_at)")
    op.execute("CREATE INDEX jobs_done_default_finished_idx ON jobs_done_default (finished_at)")
    op.execute(
        "CREATE INDEX job_attempts_default_finished_idx ON job_attempts_default (finished_at)"
    )
    if trigram is not None:
        op.execute(
            "CREATE INDEX jobs_error_search_idx ON jobs"
            " USING gin (last_error gin_trgm_ops) WHERE last_error IS NOT NULL"
        )
    # jobs_live too: a statement trigger fires for the table the statement names, and the
    # unique enqueues insert there (their ON CONFLICT needs jobs_live's unique index).
    op.execute(NOTIFY_TRIGGER.format(table="jobs"))
    op.execute(NOTIFY_TRIGGER.format(table="jobs_live"))

    op.execute(
        "CREATE TABLE job_once_keys (job_id bigint PRIMARY KEY, tenant_id bigint NOT NULL"
        " REFERENCES tenants (id) ON DELETE CASCADE, task text NOT NULL, payload jsonb NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now())"
    )
    for name, task, key in ONCE_INDEXES:
        op.execute(f"CREATE UNIQUE INDEX {name} ON job_once_keys ({key}) WHERE task = '{task}'")
    op.execute(
        "INSERT INTO job_once_keys (job_id, tenant_id, task, payload)"
        " SELECT id, tenant_id, task, payload FROM jobs WHERE task IN"
        " ('hr.notify_reviewer', 'hr.remind_reviewer', 'hr.escalate_calibration')"
    )
    op.execute(ONCE_KEY)
    op.execute(
        "CREATE INDEX jobs_notify_reviewer_idx ON jobs"
        " (tenant_id, task, (payload ->> 'cycle_id')) WHERE task = 'hr.notify_reviewer'"
    )

    op.execute("DROP TABLE job_attempts_0014")
    op.execute("DROP TABLE jobs_0014")
    op.execute("ANALYZE jobs, job_attempts")


def downgrade() -> None:
    op.execute("DROP TRIGGER jobs_once_key ON jobs")
    op.execute("DROP FUNCTION jobs_once_key()")
    op.execute("ALTER TABLE jobs RENAME TO jobs_0017")
    op.execute("ALTER TABLE job_attempts RENAME TO job_attempts_0017")
    op.execute("ALTER SEQUENCE jobs_id_seq OWNED BY NONE")
    op.execute("ALTER SEQUENCE jobs_id_seq RENAME TO jobs_id_seq_0017")
    op.execute(
        "CREATE TABLE jobs (LIKE jobs_0017 INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
        " WITH (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,"
        " autovacuum_vacuum_insert_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02,"
        " fillfactor = 90, autovacuum_vacuum_cost_delay = 0)"
    )
    op.execute("ALTER TABLE jobs ALTER COLUMN id DROP DEFAULT")
    op.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_tenant_id_fkey FOREIGN KEY (tenant_id)"
               " REFERENCES tenants (id)")  # fmt: skip
    op.execute("INSERT INTO jobs SELECT * FROM jobs_0017")
    op.execute("ALTER TABLE jobs ADD CONSTRAINT jobs_pkey PRIMARY KEY (id)")
    op.execute("ALTER TABLE jobs ALTER COLUMN id ADD GENERATED BY DEFAULT AS IDENTITY")
    op.execute("SELECT setval('jobs_id_seq', last_value, is_called) FROM jobs_id_seq_0017")
    op.execute("CREATE TABLE job_attempts (LIKE job_attempts_0017 INCLUDING ALL)")
    op.execute("INSERT INTO job_attempts SELECT a.* FROM job_attempts_0017 AS a"
               " WHERE EXISTS (SELECT FROM jobs WHERE jobs.id = a.job_id)")  # fmt: skip
    op.execute("ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_pkey"
               " PRIMARY KEY (job_id, attempt)")  # fmt: skip
    op.execute(
        "ALTER TABLE job_attempts ADD CONSTRAINT job_attempts_job_id_fkey FOREIGN KEY (job_id)"
        " REFERENCES jobs (id) ON DELETE CASCADE"
    )
    trigram = op.get_bind().execute(sa.text("SELECT to_regclass('jobs_error_search_idx')")).scalar()
    op.execute("DROP TABLE job_attempts_0017")
    op.execute("DROP TABLE jobs_0017")  # and its indexes
    op.execute("DROP SEQUENCE jobs_id_seq_0017")
    op.execute("DROP FUNCTION history_partitions(float8, float8, timestamptz, timestamptz)")
    op.execute(
        "CREATE INDEX jobs_claim_idx ON jobs (queue, priority, available_at, id)"
        " INCLUDE (tenant_id) WHERE state = 'available'"
    )
    op.execute(
        "CREATE INDEX jobs_claim_tenant_idx ON jobs (queue, tenant_id, priority, available_at, id)"
        " WHERE state = 'available'"
    )
    op.execute("CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE state = 'running'")
    op.execute(
        "CREATE INDEX jobs_finished_idx ON jobs (finished_at)"
        " WHERE state IN ('succeeded', 'dead', 'cancelled')"
    )
    op.execute(
        "CREATE INDEX jobs_dead_idx ON jobs (queue, finished_at) INCLUDE (tenant_id)"
        " WHERE state = 'dead'"
    )
    op.execute(
        "CREATE INDEX jobs_dead_fingerprint_idx ON jobs"
        " (md5(task || E'\\n' || job_error_pattern(last_error)), id) WHERE state = 'dead'"
    )
    op.execute(
        "CREATE UNIQUE INDEX jobs_unique_key_idx ON jobs (tenant_id, unique_key)"
        " WHERE unique_key IS NOT NULL AND state IN ('available', 'running')"
    )
    if trigram is not None:
        op.execute(
            "CREATE INDEX jobs_error_search_idx ON jobs"
            " USING gin (last_error gin_trgm_ops) WHERE last_error IS NOT NULL"
        )
    op.execute("DROP TABLE job_once_keys")  # its unique indexes come back on jobs
    for name, task, key in ONCE_INDEXES:
        op.execute(f"CREATE UNIQUE INDEX {name} ON jobs ({key}) WHERE task = '{task}'")
    op.execute(NOTIFY_TRIGGER.format(table="jobs"))
