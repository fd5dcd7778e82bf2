-- The engine's SQL, one named statement per act. JobStore runs them; nothing else in the engine
-- writes SQL. Parameters are psycopg named placeholders. Time always comes from now(), the
-- database clock, never from a worker's clock.
--
-- Each block starts with "-- name: <name>" and a one-line purpose.

-- name: job_insert
-- Insert one job, or return nothing when a live job already holds its unique key.
INSERT INTO jobs (tenant_id, queue, task, payload, priority, max_attempts, available_at, unique_key,
                  trace_context)
VALUES (
    coalesce(%(tenant_id)s::bigint, (SELECT id FROM tenants WHERE slug = 'system')),
    %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s, %(max_attempts)s,
    coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s::float8)),
    %(unique_key)s, %(trace_context)s::jsonb
)
ON CONFLICT (tenant_id, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'running')
DO NOTHING
RETURNING id

-- name: job_insert_many
-- Insert a batch of jobs without unique keys from parallel arrays (payloads: one JSON array);
-- returns their ids in input order.
WITH input AS MATERIALIZED (
    SELECT nextval('jobs_id_seq') AS id, batch.*
    FROM ROWS FROM (
        unnest(%(tenant_ids)b::bigint[]), unnest(%(queues)b::text[]), unnest(%(tasks)b::text[]),
        jsonb_array_elements(%(payloads)s::jsonb), unnest(%(priorities)b::smallint[]),
        unnest(%(max_attempts)b::int[]), unnest(%(delays)b::float8[]),
        unnest(%(run_ats)b::timestamptz[])
    ) WITH ORDINALITY AS batch (tenant_id, queue, task, payload, priority, max_attempts, delay,
                                run_at, position)
), inserted AS (
    INSERT INTO jobs (id, tenant_id, queue, task, payload, priority, max_attempts, available_at,
                      trace_context)
    SELECT id, coalesce(tenant_id, (SELECT id FROM tenants WHERE slug = 'system')), queue, task,
           payload, priority, max_attempts, coalesce(run_at, now() + make_interval(secs => delay)),
           %(trace_context)s::jsonb
    FROM input
)
SELECT array_agg(id ORDER BY position) FROM input

-- name: job_insert_many_unique
-- Insert a batch of jobs some of which carry unique keys; returns every input's id in order and
-- the ids actually inserted (the others are duplicates of a live job's key).
WITH input AS MATERIALIZED (
    SELECT nextval('jobs_id_seq') AS id, batch.*
    FROM ROWS FROM (
        unnest(%(tenant_ids)b::bigint[]), unnest(%(queues)b::text[]), unnest(%(tasks)b::text[]),
        jsonb_array_elements(%(payloads)s::jsonb), unnest(%(priorities)b::smallint[]),
        unnest(%(max_attempts)b::int[]), unnest(%(delays)b::float8[]),
        unnest(%(run_ats)b::timestamptz[]), unnest(%(unique_keys)b::text[])
    ) WITH ORDINALITY AS batch (tenant_id, queue, task, payload, priority, max_attempts, delay,
                                run_at, unique_key, position)
), inserted AS (
    INSERT INTO jobs (id, tenant_id, queue, task, payload, priority, max_attempts, available_at,
                      unique_key, trace_context)
    SELECT id, coalesce(tenant_id, (SELECT id FROM tenants WHERE slug = 'system')), queue, task,
           payload, priority, max_attempts,
           coalesce(run_at, now() + make_interval(secs => delay)), unique_key,
           %(trace_context)s::jsonb
    FROM input
    ON CONFLICT (tenant_id, unique_key) WHERE unique_key IS NOT NULL
                                          AND state IN ('available', 'running')
    DO NOTHING
    RETURNING id
)
SELECT (SELECT array_agg(id ORDER BY position) FROM input),
       (SELECT coalesce(array_agg(id), '{}') FROM inserted)

-- name: job_find_live_by_unique_key
-- The live job holding a unique key, if any (to answer a duplicate enqueue with its id).
SELECT id
FROM jobs
WHERE tenant_id = coalesce(%(tenant_id)s::bigint, (SELECT id FROM tenants WHERE slug = 'system'))
  AND unique_key = %(unique_key)s
  AND state IN ('available', 'running')

-- name: job_claim
-- Claim up to :limit visible jobs of one unpaused queue and mark them running, in one statement.
-- The recursive CTE walks the queue's distinct priorities (one index probe each) so that, per
-- priority, the index range stops at the first job not yet visible: scheduled and backing-off
-- jobs are never walked. Priorities come out ascending and the nested loop keeps that order, so
-- jobs are taken in (priority, available_at, id) order.
WITH RECURSIVE priorities AS (
    (SELECT priority FROM jobs
     WHERE state = 'available' AND queue = %(queue)s
     ORDER BY priority LIMIT 1)
    UNION ALL
    SELECT (SELECT next.priority FROM jobs AS next
            WHERE next.state = 'available' AND next.queue = %(queue)s
              AND next.priority > priorities.priority
            ORDER BY next.priority LIMIT 1)
    FROM priorities
    WHERE priorities.priority IS NOT NULL
), picked AS MATERIALIZED (
    SELECT visible.id
    FROM priorities
    CROSS JOIN LATERAL (
        SELECT id
        FROM jobs
        WHERE state = 'available'
          AND queue = %(queue)s
          AND priority = priorities.priority
          AND available_at <= now()
        ORDER BY available_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS visible
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = %(queue)s AND paused)
    LIMIT %(limit)s
)
UPDATE jobs
SET state = 'running',
    attempt = jobs.attempt + 1,
    locked_by = %(worker)s,
    started_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::float8)
FROM picked
WHERE jobs.id = picked.id
RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.task, jobs.payload, jobs.priority,
          jobs.attempt, jobs.max_attempts, jobs.available_at, jobs.started_at, jobs.trace_context

-- name: job_finish
-- Record a batch of attempt results, fenced by (id, attempt, locked_by); write each attempt's row.
-- The fence names no state: the CHECK jobs_running_has_lease makes locked_by imply 'running',
-- and a state condition would tempt the planner into the lease index, whose entries of long
-- finished jobs (until vacuum) it would walk on every batch, instead of the primary key.
WITH result AS (
    SELECT *
    FROM unnest(
        %(ids)s::bigint[], %(attempts)s::int[], %(outcomes)s::text[], %(errors)s::text[],
        %(tracebacks)s::text[], %(retry_delays)s::float8[], %(durations)s::float8[],
        %(trace_ids)s::text[]
    ) AS result (id, attempt, outcome, error, traceback, retry_delay, duration, trace_id)
), finished AS (
    UPDATE jobs
    SET state = CASE
            WHEN result.outcome = 'succeeded' THEN 'succeeded'
            WHEN result.outcome = 'dead' OR jobs.attempt >= jobs.max_attempts THEN 'dead'
            ELSE 'available'
        END,
        available_at = CASE
            WHEN result.outcome = 'failed' AND jobs.attempt < jobs.max_attempts
                THEN now() + make_interval(secs => result.retry_delay)
            ELSE jobs.available_at
        END,
        finished_at = CASE
            WHEN result.outcome = 'failed' AND jobs.attempt < jobs.max_attempts THEN NULL
            ELSE now()
        END,
        last_error = coalesce(result.error, jobs.last_error),
        locked_by = NULL,
        lease_expires_at = NULL
    FROM result
    WHERE jobs.id = result.id
      AND jobs.attempt = result.attempt
      AND jobs.locked_by = %(worker)s  -- only running jobs have a locker (jobs_running_has_lease)
    RETURNING jobs.id, jobs.attempt, jobs.started_at, jobs.state, result.outcome, result.error,
              result.traceback, result.duration, result.trace_id
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              traceback, duration, trace_id)
    SELECT id, attempt, %(worker)s, started_at, now(),
           CASE WHEN outcome = 'succeeded' THEN 'succeeded' ELSE 'failed' END,
           error, traceback, make_interval(secs => duration), trace_id
    FROM finished
)
SELECT id, attempt, state, date_trunc('minute', now()) FROM finished

-- name: job_release
-- Give jobs back at shutdown: unstarted ones as if never claimed, started ones as 'released'.
WITH handed_back AS (
    SELECT *
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(started)s::bool[],
                %(durations)s::float8[])
        AS handed_back (id, attempt, started, duration)
), released AS (
    UPDATE jobs
    SET state = 'available',
        -- An unstarted job keeps its place in line; a started one goes to the back.
        available_at = CASE WHEN handed_back.started THEN now() ELSE jobs.available_at END,
        attempt = CASE WHEN handed_back.started THEN jobs.attempt ELSE jobs.attempt - 1 END,
        -- A release is not a failure: the budget grows by the attempt it used.
        max_attempts = CASE WHEN handed_back.started THEN jobs.max_attempts + 1
                            ELSE jobs.max_attempts END,
        locked_by = NULL,
        lease_expires_at = NULL
    FROM handed_back
    WHERE jobs.id = handed_back.id
      AND jobs.attempt = handed_back.attempt
      AND jobs.locked_by = %(worker)s  -- only running jobs have a locker (jobs_running_has_lease)
    RETURNING jobs.id, jobs.queue, jobs.attempt, jobs.started_at, handed_back.started,
              handed_back.duration
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              duration)
    SELECT id, attempt, %(worker)s, started_at, now(), 'released',
           'released at worker shutdown before the job finished', make_interval(secs => duration)
    FROM released
    WHERE started
)
SELECT released.id, released.started, date_trunc('minute', now()),
       pg_notify('pauta_jobs', released.queue)
FROM released

-- name: job_extend_leases
-- Extend the leases of a worker's in-flight jobs; returns the (id, attempt) pairs it still owns.
UPDATE jobs
SET lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::float8)
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held (id, attempt)
WHERE jobs.id = held.id
  AND jobs.attempt = held.attempt
  AND jobs.locked_by = %(worker)s  -- only running jobs have a locker (jobs_running_has_lease)
RETURNING jobs.id, jobs.attempt

-- name: job_rescue_expired
-- Return running jobs whose lease has expired to 'available' (or 'dead' when out of attempts).
WITH expired AS MATERIALIZED (
    SELECT id, attempt, locked_by, started_at, lease_expires_at
    FROM jobs
    WHERE state = 'running' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE jobs
    SET state = CASE WHEN jobs.attempt >= jobs.max_attempts THEN 'dead' ELSE 'available' END,
        available_at = now(),
        finished_at = CASE WHEN jobs.attempt >= jobs.max_attempts THEN now() END,
        last_error = 'LeaseExpired: worker ' || expired.locked_by
                     || ' stopped renewing its lease (crashed, killed or cut off)',
        locked_by = NULL,
        lease_expires_at = NULL
    FROM expired
    WHERE jobs.id = expired.id
    RETURNING jobs.id, jobs.queue, jobs.tenant_id, jobs.state, jobs.last_error, expired.attempt,
              expired.locked_by, expired.started_at, expired.lease_expires_at
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              duration)
    SELECT id, attempt, locked_by, started_at, now(), 'lease_expired', last_error,
           lease_expires_at - started_at
    FROM rescued
)
SELECT id, queue, tenant_id, state, date_trunc('minute', now()), pg_notify('pauta_jobs', queue)
FROM rescued

-- name: job_prune
-- Delete one batch of finished jobs older than their retention age (attempts go by cascade).
WITH doomed AS (
    SELECT id
    FROM jobs
    WHERE (state IN ('succeeded', 'cancelled')
           AND finished_at < now() - make_interval(secs => %(keep_succeeded_seconds)s::float8))
       OR (state = 'dead'
           AND finished_at < now() - make_interval(secs => %(keep_dead_seconds)s::float8))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM jobs USING doomed WHERE jobs.id = doomed.id

-- name: job_requeue
-- Put a dead or cancelled job back to work now, with a fresh attempt budget; history is kept.
WITH requeued AS (
    UPDATE jobs
    SET state = 'available',
        available_at = now(),
        finished_at = NULL,
        max_attempts = jobs.attempt + %(attempt_budget)s
    WHERE id = %(id)s AND state IN ('dead', 'cancelled')
    RETURNING id, queue
)
SELECT id, pg_notify('pauta_jobs', queue) FROM requeued

-- name: job_cancel
-- Withdraw a job that is waiting (now or scheduled) so it never runs.
UPDATE jobs
SET state = 'cancelled', finished_at = now()
WHERE id = %(id)s AND state = 'available'
RETURNING id

-- name: job_run_now
-- Make a scheduled or backing-off job visible at once.
WITH advanced AS (
    UPDATE jobs
    SET available_at = now()
    WHERE id = %(id)s AND state = 'available' AND available_at > now()
    RETURNING id, queue
)
SELECT id, pg_notify('pauta_jobs', queue) FROM advanced

-- name: job_get
-- One job row, for explaining why an operation did not apply.
SELECT id, tenant_id, queue, task, payload, priority, state, attempt, max_attempts, available_at,
       available_at > now() AS scheduled, created_at, started_at, finished_at, lease_expires_at,
       locked_by, last_error, unique_key
FROM jobs
WHERE id = %(id)s

-- name: job_attempt_list
-- A job's attempt history, oldest first.
SELECT attempt, worker, started_at, finished_at, outcome, error, traceback,
       extract(epoch FROM duration)::float8 AS duration_seconds, trace_id
FROM job_attempts
WHERE job_id = %(id)s
ORDER BY attempt

-- name: queue_pause
-- Pause a queue (creating its row if need be): no job of it is claimed until resumed.
INSERT INTO queues (name, paused, paused_at, paused_by)
VALUES (%(queue)s, true, now(), %(paused_by)s)
ON CONFLICT (name) DO UPDATE
SET paused = true, paused_at = now(), paused_by = excluded.paused_by

-- name: queue_resume
-- Resume a paused queue and wake its workers.
WITH resumed AS (
    UPDATE queues
    SET paused = false, paused_at = NULL, paused_by = NULL
    WHERE name = %(queue)s
    RETURNING name
)
SELECT name, pg_notify('pauta_jobs', name) FROM resumed

-- name: queue_list
-- Every known queue with its paused state.
SELECT name, paused, paused_at, paused_by, created_at FROM queues ORDER BY name

-- name: queue_state_counts
-- Jobs per queue and state; 'scheduled' counts available jobs whose time has not come.
SELECT queue,
       CASE WHEN state = 'available' AND available_at > now() THEN 'scheduled' ELSE state END
           AS state,
       count(*) AS jobs
FROM jobs
GROUP BY 1, 2
ORDER BY 1, 2

-- name: job_stats_minute_add
-- Add a worker's counted deltas to the per-minute stats, one UPSERT for every row.
INSERT INTO job_stats_minute AS stats (queue, minute, tenant_id, succeeded, failed, dead,
                                       released, runtime_sum, runtime_max, wait_sum, wait_max)
SELECT *
FROM unnest(%(queues)s::text[], %(minutes)s::timestamptz[], %(tenant_ids)s::bigint[],
            %(succeeded)s::int[], %(failed)s::int[], %(dead)s::int[], %(released)s::int[],
            %(runtime_sums)s::float8[], %(runtime_maxes)s::float8[], %(wait_sums)s::float8[],
            %(wait_maxes)s::float8[])
ON CONFLICT (queue, minute, tenant_id) DO UPDATE
SET succeeded = stats.succeeded + excluded.succeeded,
    failed = stats.failed + excluded.failed,
    dead = stats.dead + excluded.dead,
    released = stats.released + excluded.released,
    runtime_sum = stats.runtime_sum + excluded.runtime_sum,
    runtime_max = greatest(stats.runtime_max, excluded.runtime_max),
    wait_sum = stats.wait_sum + excluded.wait_sum,
    wait_max = greatest(stats.wait_max, excluded.wait_max)

-- name: queue_depth_sample
-- Record every queue's depth per tenant for this minute. Each arm of the UNION reads one state
-- through that state's partial index, so finished jobs are never read.
WITH live AS (
    SELECT queue, tenant_id, state, available_at FROM jobs WHERE state = 'available'
    UNION ALL
    SELECT queue, tenant_id, state, NULL FROM jobs WHERE state = 'running'
    UNION ALL
    SELECT queue, tenant_id, state, NULL FROM jobs WHERE state = 'dead'
)
INSERT INTO queue_depth_minute AS depth (queue, minute, tenant_id, available, scheduled,
                                         running, dead, oldest_available_seconds)
SELECT queue, date_trunc('minute', now()), tenant_id,
       count(*) FILTER (WHERE state = 'available' AND available_at <= now()),
       count(*) FILTER (WHERE state = 'available' AND available_at > now()),
       count(*) FILTER (WHERE state = 'running'),
       count(*) FILTER (WHERE state = 'dead'),
       extract(epoch FROM now() - min(available_at)
                             FILTER (WHERE state = 'available' AND available_at <= now()))
FROM live
GROUP BY queue, tenant_id
ON CONFLICT (queue, minute, tenant_id) DO UPDATE
SET available = excluded.available,
    scheduled = excluded.scheduled,
    running = excluded.running,
    dead = excluded.dead,
    oldest_available_seconds = excluded.oldest_available_seconds

-- name: queue_depth_now
-- Every known queue's depth now (live states only, each through its partial index).
WITH live AS (
    SELECT queue, state, available_at FROM jobs WHERE state = 'available'
    UNION ALL
    SELECT queue, state, NULL FROM jobs WHERE state = 'running'
    UNION ALL
    SELECT queue, state, NULL FROM jobs WHERE state = 'dead'
), counted AS (
    SELECT queue,
           count(*) FILTER (WHERE state = 'available' AND available_at <= now()) AS available,
           count(*) FILTER (WHERE state = 'available' AND available_at > now()) AS scheduled,
           count(*) FILTER (WHERE state = 'running') AS running,
           count(*) FILTER (WHERE state = 'dead') AS dead,
           coalesce(extract(epoch FROM now() - min(available_at)
                    FILTER (WHERE state = 'available' AND available_at <= now())), 0)::float8
               AS oldest_age
    FROM live
    GROUP BY queue
)
SELECT queues.name, coalesce(available, 0), coalesce(scheduled, 0), coalesce(running, 0),
       coalesce(dead, 0), coalesce(oldest_age, 0)
FROM queues LEFT JOIN counted ON counted.queue = queues.name
ORDER BY queues.name

-- name: stats_prune
-- Delete per-minute stats and depth samples older than their retention age.
WITH old_stats AS (
    DELETE FROM job_stats_minute
    WHERE minute < now() - make_interval(secs => %(keep_seconds)s::float8)
), old_depth AS (
    DELETE FROM queue_depth_minute
    WHERE minute < now() - make_interval(secs => %(keep_seconds)s::float8)
)
DELETE FROM workers
WHERE state IN ('stopped', 'lost')
  AND last_heartbeat_at < now() - make_interval(secs => %(keep_seconds)s::float8)

-- name: worker_register
-- Register a supervisor or a queue child; returns its id.
INSERT INTO workers (name, hostname, pid, parent_id, queue, threads)
VALUES (%(name)s, %(hostname)s, %(pid)s, %(parent_id)s, %(queue)s, %(threads)s)
RETURNING id

-- name: worker_heartbeat
-- Record that a worker is alive and how many jobs it holds; returns whether a drain was asked.
UPDATE workers
SET last_heartbeat_at = now(),
    in_flight = %(in_flight)s,
    state = %(state)s  -- a worker marked lost that speaks again is back
WHERE id = %(id)s
RETURNING drain_requested_at IS NOT NULL

-- name: worker_set_state
-- Move a worker to draining or stopped.
UPDATE workers
SET state = %(state)s,
    in_flight = coalesce(%(in_flight)s, in_flight),
    last_heartbeat_at = now(),
    stopped_at = CASE WHEN %(state)s = 'stopped' THEN now() END
WHERE id = %(id)s

-- name: worker_request_drain
-- Ask a worker (and, for a supervisor, its children) to shut down gracefully.
UPDATE workers
SET drain_requested_at = coalesce(drain_requested_at, now()),
    drain_requested_by = coalesce(drain_requested_by, %(requested_by)s)
WHERE (id = %(id)s OR parent_id = %(id)s) AND state IN ('running', 'draining')
RETURNING id

-- name: worker_mark_lost
-- Mark live-looking workers that stopped heartbeating as lost.
UPDATE workers
SET state = 'lost'
WHERE state IN ('running', 'draining')
  AND last_heartbeat_at < now() - make_interval(secs => %(lost_after_seconds)s::float8)
RETURNING id, name

-- name: leader_try_acquire
-- Try to become the one maintenance leader (session advisory lock; freed if the session dies).
SELECT pg_try_advisory_lock(%(key)s::bigint)

-- name: leader_release
-- Step down as maintenance leader.
SELECT pg_advisory_unlock(%(key)s::bigint)
