-- The workflow engine's SQL, one named statement per act; WorkflowStore runs them, nothing else in
-- workflows/ writes SQL. Time comes from now(), the database clock.
--
-- Lock order, everywhere: the workflow_executions row first (FOR NO KEY UPDATE, which lets
-- inserts of rows referencing it through), then its wait rows,
-- then its job row. A slice, send_event, cancel and resume all follow it, so none can wait on
-- another in a cycle, and an event cannot slip between a wait being written and the slice that
-- wrote it letting go (the lost-wakeup race).
--
-- Each block starts with "-- name: <name>" and a one-line purpose.

-- name: execution_insert
-- Insert an execution, or return nothing when an unfinished one holds the idempotency key.
INSERT INTO workflow_executions (tenant_id, name, version, input, idempotency_key, parent_id,
                                 trace_context)
VALUES (coalesce(%(tenant_id)s::bigint, (SELECT id FROM tenants WHERE slug = 'system')),
        %(name)s, %(version)s, %(input)s::jsonb, %(idempotency_key)s, %(parent_id)s,
        %(trace_context)s::jsonb)
ON CONFLICT (tenant_id, name, idempotency_key)
    WHERE idempotency_key IS NOT NULL AND finished_at IS NULL
DO NOTHING
RETURNING id, tenant_id

-- name: execution_find_unfinished_by_key
-- The unfinished execution holding an idempotency key, with its input.
SELECT id, tenant_id, input
FROM workflow_executions
WHERE tenant_id = coalesce(%(tenant_id)s::bigint, (SELECT id FROM tenants WHERE slug = 'system'))
  AND name = %(name)s
  AND idempotency_key = %(idempotency_key)s
  AND finished_at IS NULL

-- name: execution_get
-- One execution's row.
SELECT id, tenant_id, name, version, input, status, output, error, idempotency_key, parent_id,
       trace_context, created_at, updated_at, finished_at
FROM workflow_executions
WHERE id = %(id)s

-- name: slice_load
-- What a slice starts from, in one round trip: the execution, its recorded steps in order (what
-- a replay returns instead of running them) and the waits it wrote whose step has no output yet
-- (a replay must reach them as waits).
SELECT e.id, e.tenant_id, e.name, e.input, e.status,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(o.step_id, o.name, o.kind, o.output, o.error,
                                                    o.attempts) ORDER BY o.step_id), '[]')
        FROM operation_outputs AS o
        WHERE o.execution_id = e.id) AS steps,
       (SELECT coalesce(jsonb_agg(jsonb_build_array(w.step_id, w.kind, w.key)), '[]')
        FROM workflow_waits AS w
        WHERE w.execution_id = e.id
          AND NOT EXISTS (SELECT 1 FROM operation_outputs AS o
                          WHERE o.execution_id = w.execution_id AND o.step_id = w.step_id))
       AS open_waits
FROM workflow_executions AS e
WHERE e.id = %(id)s

-- name: execution_lock
-- Lock one execution for an act on it (the first lock of every act: see the lock order).
SELECT id, tenant_id, name, status
FROM workflow_executions
WHERE id = %(id)s
FOR NO KEY UPDATE

-- name: step_guard
-- A slice's step boundary, in one statement: lock the execution, then the slice's job (the
-- fence: id, attempt and locked_by still the slice's claim); if both still hold, mark a pending
-- or waiting execution running, write the checkpoint the slice held back (step_id NULL: none),
-- and, with end_status, end the execution (only if that checkpoint was written). Returns the
-- execution's status (running once marked), whether the fence held, and whether the held-back
-- checkpoint was written (no row: the execution is gone). Run alone it is its own transaction;
-- at the start of one, it holds the locks for what the transaction does next.
WITH execution AS (
    SELECT id, status FROM workflow_executions WHERE id = %(execution_id)s FOR NO KEY UPDATE
), guard AS (
    SELECT execution.id, execution.status,
           EXISTS (SELECT 1 FROM jobs
                   WHERE id = %(job_id)s AND attempt = %(attempt)s AND locked_by = %(worker)s
                     AND state IN ('available', 'running')
                   FOR SHARE) AS fenced
    FROM execution
), open AS (
    SELECT id FROM guard WHERE fenced AND status IN ('pending', 'waiting', 'running')
), started AS (
    UPDATE workflow_executions AS e
    SET status = 'running', updated_at = now()
    FROM guard
    WHERE e.id = guard.id AND guard.fenced AND guard.status IN ('pending', 'waiting')
      AND %(end_status)s::text IS NULL
), recorded AS (
    INSERT INTO operation_outputs (execution_id, step_id, name, kind, output, error, attempts,
                                   started_at, finished_at)
    SELECT open.id, %(step_id)s::int, %(name)s, %(kind)s, %(output)s::jsonb, %(error)s,
           %(attempts)s, to_timestamp(%(started_at)s::float8),
           to_timestamp(%(finished_at)s::float8)
    FROM open
    WHERE %(step_id)s::int IS NOT NULL
    ON CONFLICT (execution_id, step_id) DO NOTHING
    RETURNING step_id
), ended AS (
    UPDATE workflow_executions AS e
    SET status = %(end_status)s::text, output = %(end_output)s::jsonb, error = %(end_error)s,
        updated_at = now(), finished_at = now()
    FROM open
    WHERE e.id = open.id AND %(end_status)s::text IS NOT NULL
      AND (%(step_id)s::int IS NULL OR EXISTS (SELECT 1 FROM recorded))
)
SELECT CASE WHEN guard.fenced AND guard.status IN ('pending', 'waiting') THEN 'running'
            ELSE guard.status END AS status,
       guard.fenced,
       %(step_id)s::int IS NULL OR EXISTS (SELECT 1 FROM recorded) AS recorded
FROM guard

-- name: step_guard_many
-- step_guard for the boundaries of several slices at once (a group of slices run together: see
-- jobqueue.cooperative), each row as step_guard would do it alone; the executions are locked in
-- id order, each before its slice's job. The boundaries come as one JSON array of arrays, a
-- boundary's fifteen values by position (one parameter: dumping fifteen arrays element by element
-- was half a group thread's Python; objects by name cost the server 5 µs a row more to take
-- apart, with their times as text to parse); a step's output is boxed as [output] so that a
-- JSON null stays a JSON null, and no output (a failed step, a failed end) is a null box, which
-- must become SQL NULL (-> 0 of a JSON null gives the JSON null); its times are epoch seconds. Answers one entry per execution
-- found, with its id.
WITH input AS (
    SELECT (b ->> 0)::bigint AS execution_id, (b ->> 1)::bigint AS job_id,
           (b ->> 2)::int AS attempt, b ->> 3 AS worker, (b ->> 4)::int AS step_id,
           b ->> 5 AS name, b ->> 6 AS kind, nullif(b -> 7, 'null') -> 0 AS output,
           b ->> 8 AS error,
           (b ->> 9)::int AS step_attempts, to_timestamp((b ->> 10)::float8) AS started_at,
           to_timestamp((b ->> 11)::float8) AS finished_at, b ->> 12 AS end_status,
           nullif(b -> 13, 'null') -> 0 AS end_output, b ->> 14 AS end_error
    FROM jsonb_array_elements(%(boundaries)s::jsonb) AS boundary(b)
), execution AS (
    -- = ANY of an array, not IN: the planner cannot see how few rows the JSON holds, and with
    -- IN it read the whole table to hash-join it (a group's write grew with the table)
    SELECT id, status FROM workflow_executions
    WHERE id = ANY (ARRAY(SELECT execution_id FROM input))
    ORDER BY id
    FOR NO KEY UPDATE
), guard AS (
    SELECT input.*, execution.status,
           EXISTS (SELECT 1 FROM jobs
                   WHERE id = input.job_id AND attempt = input.attempt
                     AND locked_by = input.worker AND state IN ('available', 'running')
                   FOR SHARE) AS fenced
    FROM input JOIN execution ON execution.id = input.execution_id
), open AS (
    SELECT * FROM guard WHERE fenced AND status IN ('pending', 'waiting', 'running')
), started AS (
    UPDATE workflow_executions AS e
    SET status = 'running', updated_at = now()
    FROM guard
    WHERE e.id = guard.execution_id AND guard.fenced AND guard.status IN ('pending', 'waiting')
      AND guard.end_status IS NULL
), recorded AS (
    INSERT INTO operation_outputs (execution_id, step_id, name, kind, output, error, attempts,
                                   started_at, finished_at)
    SELECT execution_id, step_id, name, kind, output, error, step_attempts, started_at,
           finished_at
    FROM open
    WHERE step_id IS NOT NULL
    ON CONFLICT (execution_id, step_id) DO NOTHING
    RETURNING execution_id
), ended AS (
    UPDATE workflow_executions AS e
    SET status = open.end_status, output = open.end_output, error = open.end_error,
        updated_at = now(), finished_at = now()
    FROM open
    WHERE e.id = open.execution_id AND open.end_status IS NOT NULL
      AND (open.step_id IS NULL
           OR EXISTS (SELECT 1 FROM recorded WHERE recorded.execution_id = open.execution_id))
)
-- as one JSON array of [execution id, status, fenced, recorded]: one value to decode
SELECT coalesce(jsonb_agg(jsonb_build_array(
           guard.execution_id,
           CASE WHEN guard.fenced AND guard.status IN ('pending', 'waiting') THEN 'running'
                ELSE guard.status END,
           guard.fenced,
           guard.step_id IS NULL
           OR EXISTS (SELECT 1 FROM recorded WHERE recorded.execution_id = guard.execution_id))),
       '[]')
FROM guard

-- name: slice_load_many
-- slice_load for several slices at once (a group of slices run together), as one JSON array of
-- arrays, each execution's values in slice_load's order: one value to decode for the group, where
-- a row of five columns, three of them JSON, cost a third of a group thread's Python.
SELECT coalesce(jsonb_agg(jsonb_build_array(
    e.id, e.tenant_id, e.name, e.input, e.status,
    (SELECT coalesce(jsonb_agg(jsonb_build_array(o.step_id, o.name, o.kind, o.output, o.error,
                                                 o.attempts)
                               ORDER BY o.step_id), '[]')
     FROM operation_outputs AS o
     WHERE o.execution_id = e.id),
    (SELECT coalesce(jsonb_agg(jsonb_build_array(w.step_id, w.kind, w.key)), '[]')
     FROM workflow_waits AS w
     WHERE w.execution_id = e.id
       AND NOT EXISTS (SELECT 1 FROM operation_outputs AS o
                       WHERE o.execution_id = w.execution_id AND o.step_id = w.step_id)))), '[]')
FROM workflow_executions AS e
WHERE e.id = ANY (%(ids)s::bigint[])

-- name: session_relax_durability
-- A relaxed-durability workflow's slice: its commits do not wait for their WAL flush.
SET synchronous_commit = off

-- name: session_restore_durability
-- After that slice: the pooled connection's commits wait again, as the server's setting says.
RESET synchronous_commit

-- name: step_record
-- Checkpoint one step's result; no row back means the step was recorded before (keep that one).
INSERT INTO operation_outputs (execution_id, step_id, name, kind, output, error, attempts,
                               started_at, finished_at)
VALUES (%(execution_id)s, %(step_id)s, %(name)s, %(kind)s, %(output)s::jsonb, %(error)s,
        %(attempts)s, coalesce(to_timestamp(%(started_at)s::float8), now()),
        coalesce(to_timestamp(%(finished_at)s::float8), now()))
ON CONFLICT (execution_id, step_id) DO NOTHING
RETURNING output

-- name: step_get
-- One recorded step (what a checkpoint that lost the conflict returns instead).
SELECT step_id, name, kind, output, error, attempts
FROM operation_outputs
WHERE execution_id = %(execution_id)s AND step_id = %(step_id)s

-- name: wait_get
-- The wait an execution wrote at one step position, if any, and whether it is due.
SELECT kind, key, wake_at, satisfied_at, outcome, payload, decided_by,
       wake_at IS NOT NULL AND wake_at <= now() AS due
FROM workflow_waits
WHERE execution_id = %(execution_id)s AND step_id = %(step_id)s

-- name: wait_insert
-- Write a wait (sleep: key NULL; event: its key); returns its wake time, computed by the database.
INSERT INTO workflow_waits (execution_id, step_id, kind, key, wake_at)
VALUES (%(execution_id)s, %(step_id)s, %(kind)s, %(key)s,
        CASE WHEN %(seconds)s::float8 IS NOT NULL
             THEN now() + make_interval(secs => %(seconds)s::float8)
             ELSE %(until)s::timestamptz END)
RETURNING wake_at

-- name: wait_close
-- Close an open wait with an outcome ('woke', 'timeout' or 'cancelled').
UPDATE workflow_waits
SET satisfied_at = now(), outcome = %(outcome)s
WHERE execution_id = %(execution_id)s AND step_id = %(step_id)s AND satisfied_at IS NULL

-- name: execution_suspend
-- Park an execution on a wait: set it waiting and finish the slice's job as succeeded (its
-- attempt row written like job_finish writes it), fenced by the job's (id, attempt, locked_by).
-- Returns the job's tenant, or nothing when the lease was lost.
WITH parked AS (
    UPDATE workflow_executions
    SET status = 'waiting', updated_at = now()
    WHERE id = %(execution_id)s
), finished AS (
    UPDATE jobs
    SET state = 'succeeded', finished_at = now(), locked_by = NULL, lease_expires_at = NULL
    WHERE id = %(job_id)s AND attempt = %(attempt)s AND locked_by = %(worker)s
      AND state IN ('available', 'running')
    RETURNING id, tenant_id, attempt, started_at
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome,
                              duration)
    SELECT id, attempt, %(worker)s, started_at, now(), 'succeeded', now() - started_at
    FROM finished
)
SELECT tenant_id FROM finished

-- name: event_wait_find
-- The latest wait on an event key of an execution, and whether its timeout has passed.
SELECT step_id, wake_at, satisfied_at, outcome, decided_by,
       wake_at IS NOT NULL AND wake_at <= now() AS due
FROM workflow_waits
WHERE execution_id = %(execution_id)s AND kind = 'event' AND key = %(key)s
ORDER BY step_id DESC
LIMIT 1

-- name: event_satisfy
-- Satisfy an open, not yet timed-out event wait; no row back means it was not open any more.
UPDATE workflow_waits
SET satisfied_at = now(), outcome = 'event', payload = %(payload)s::jsonb,
    decided_by = %(decided_by)s
WHERE execution_id = %(execution_id)s AND step_id = %(step_id)s
  AND satisfied_at IS NULL AND (wake_at IS NULL OR wake_at > now())
RETURNING satisfied_at

-- name: slice_job_wake
-- Make an execution's waiting slice job visible now and wake the workflows queue's workers;
-- returns the job's id (no row: it has no waiting job, and one must be enqueued).
UPDATE jobs
SET available_at = now()
WHERE tenant_id = %(tenant_id)s AND unique_key = %(unique_key)s AND state = 'available'
RETURNING id, pg_notify('pauta_jobs', queue)

-- name: slice_job_cancel
-- Cancel an execution's waiting slice job (a running one finds the execution cancelled).
UPDATE jobs
SET state = 'cancelled', finished_at = now()
WHERE tenant_id = %(tenant_id)s AND unique_key = %(unique_key)s AND state = 'available'

-- name: execution_cancel
-- Cancel an unfinished execution and close its open waits.
WITH closed AS (
    UPDATE workflow_waits
    SET satisfied_at = now(), outcome = 'cancelled'
    WHERE execution_id = %(execution_id)s AND satisfied_at IS NULL
)
UPDATE workflow_executions
SET status = 'cancelled', updated_at = now(), finished_at = now()
WHERE id = %(execution_id)s AND finished_at IS NULL

-- name: execution_resume
-- Take a failed execution back to pending, forgetting its failed step so a replay runs it again;
-- returns the failed step's id, name and error (no step: the workflow code itself raised).
WITH forgotten AS (
    DELETE FROM operation_outputs
    WHERE execution_id = %(execution_id)s AND error IS NOT NULL
    RETURNING step_id, name, error
), resumed AS (
    UPDATE workflow_executions
    SET status = 'pending', error = NULL, updated_at = now(), finished_at = NULL
    WHERE id = %(execution_id)s AND status = 'failed'
)
SELECT step_id, name, error FROM forgotten

-- name: console_execution_list
-- One keyset page of executions, newest first, each with its open wait (if waiting).
SELECT e.id, e.tenant_id, t.slug AS tenant, e.name, e.status, e.created_at, e.updated_at,
       e.finished_at, e.error, w.kind AS wait_kind, w.key AS wait_key, w.wake_at,
       w.created_at AS waiting_since
FROM workflow_executions AS e
JOIN tenants AS t ON t.id = e.tenant_id
LEFT JOIN workflow_waits AS w ON w.execution_id = e.id AND w.satisfied_at IS NULL
WHERE (%(tenant_id)s::bigint IS NULL OR e.tenant_id = %(tenant_id)s::bigint)
  AND (%(status)s::text IS NULL OR e.status = %(status)s::text)
  AND (%(name)s::text IS NULL OR e.name = %(name)s::text)
  AND (%(waiting_on)s::text IS NULL
       OR (w.execution_id IS NOT NULL AND coalesce(w.key, 'sleep') = %(waiting_on)s::text))
  AND (%(started_from)s::timestamptz IS NULL OR e.created_at >= %(started_from)s::timestamptz)
  AND (%(started_to)s::timestamptz IS NULL OR e.created_at < %(started_to)s::timestamptz)
  AND (%(before)s::bigint IS NULL OR e.id < %(before)s::bigint)
ORDER BY e.id DESC
LIMIT %(limit)s

-- name: console_execution_detail
-- One execution with its tenant's slug, if the reader's tenant (NULL: any) owns it.
SELECT e.id, e.tenant_id, t.slug AS tenant, e.name, e.version, e.input, e.status, e.output,
       e.error, e.idempotency_key, e.parent_id, e.created_at, e.updated_at, e.finished_at
FROM workflow_executions AS e
JOIN tenants AS t ON t.id = e.tenant_id
WHERE e.id = %(id)s AND (%(tenant_id)s::bigint IS NULL OR e.tenant_id = %(tenant_id)s::bigint)

-- name: console_execution_steps
-- An execution's step timeline: each recorded step with a preview of its output.
SELECT step_id, name, kind, attempts, started_at, finished_at,
       extract(epoch FROM finished_at - started_at)::float8 AS seconds,
       left(output::text, %(preview)s) AS output_preview, error
FROM operation_outputs
WHERE execution_id = %(id)s
ORDER BY step_id

-- name: console_execution_waits
-- An execution's waits, open or over, in step order.
SELECT step_id, kind, key, wake_at, satisfied_at, outcome, left(payload::text, %(preview)s)
       AS payload_preview, decided_by, created_at
FROM workflow_waits
WHERE execution_id = %(id)s
ORDER BY step_id

-- name: console_execution_jobs
-- The slice jobs of an execution (where their attempts and traces are), newest first.
SELECT id, state, attempt, available_at, finished_at
FROM jobs
WHERE tenant_id = %(tenant_id)s AND unique_key = %(unique_key)s AND queue = 'workflows'
ORDER BY id DESC
LIMIT 20

-- name: console_workflow_counts
-- Executions by status, and the oldest open wait of a waiting one, for a tenant (NULL: all).
SELECT (SELECT coalesce(jsonb_object_agg(status, executions), '{}'::jsonb)
        FROM (SELECT status, count(*) AS executions
              FROM workflow_executions
              WHERE %(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s::bigint
              GROUP BY status) AS counted) AS by_status,
       oldest.execution_id AS oldest_waiting_id, oldest.key AS oldest_waiting_key,
       oldest.created_at AS oldest_waiting_since
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT w.execution_id, coalesce(w.key, 'sleep') AS key, w.created_at
    FROM workflow_waits AS w
    JOIN workflow_executions AS e ON e.id = w.execution_id
    WHERE w.satisfied_at IS NULL AND e.status = 'waiting'
      AND (%(tenant_id)s::bigint IS NULL OR e.tenant_id = %(tenant_id)s::bigint)
    ORDER BY w.created_at
    LIMIT 1
) AS oldest ON true
