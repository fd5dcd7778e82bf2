-- The engine's SQL, one named statement per act. JobStore runs them; nothing else in the engine
-- writes SQL. Parameters are psycopg named placeholders. Time always comes from now(), the
-- database clock, never from a worker's clock.
--
-- Each block starts with "-- name: <name>" and a one-line purpose.

-- name: job_insert
-- Insert one job, or return nothing when a live job already holds its unique key. It goes to
-- jobs_live by name: only there is the unique key's index that ON CONFLICT needs.
INSERT INTO jobs_live (tenant_id, queue, task, payload, priority, max_attempts, available_at, unique_key,
                  trace_context, timeout_seconds)
VALUES (
    coalesce(%(tenant_id)s::bigint, (SELECT id FROM tenants WHERE slug = 'system')),
    %(queue)s, %(task)s, %(payload)s::jsonb, %(priority)s, %(max_attempts)s,
    coalesce(%(run_at)s::timestamptz, now() + make_interval(secs => %(delay)s::float8)),
    %(unique_key)s, %(trace_context)s::jsonb, %(timeout)s::float8
)
ON CONFLICT (tenant_id, unique_key) WHERE unique_key IS NOT NULL AND state IN ('available', 'running')
DO NOTHING
RETURNING id

-- name: job_insert_many
-- Insert a batch of jobs without unique keys; returns their ids in input order. A column whose
-- value is the same for the whole batch comes as that one value (%(common_...)s) and an empty
-- array, any other as an array and NULL (JobStore.insert_jobs): ROWS FROM pads the empty arrays
-- with NULLs, and coalesce takes the row's value, else the batch's. Payloads: one JSON array.
-- Into jobs_live by name, as job_insert: a new job is available, and the parent's routing of
-- every row to that partition cost about a tenth of the statement.
WITH input AS MATERIALIZED (
    SELECT nextval('jobs_id_seq') AS id, batch.*
    FROM ROWS FROM (
        unnest(%(tenant_ids)b::bigint[]), unnest(%(queues)b::text[]), unnest(%(tasks)b::text[]),
        jsonb_array_elements(%(payloads)s::jsonb), unnest(%(priorities)b::smallint[]),
        unnest(%(max_attempts)b::int[]), unnest(%(delays)b::float8[]),
        unnest(%(run_ats)b::timestamptz[]), unnest(%(timeouts)b::float8[])
    ) WITH ORDINALITY AS batch (tenant_id, queue, task, payload, priority, max_attempts, delay,
                                run_at, timeout_seconds, position)
), inserted AS (
    INSERT INTO jobs_live (id, tenant_id, queue, task, payload, priority, max_attempts,
                           available_at, trace_context, timeout_seconds)
    SELECT id,
           coalesce(tenant_id, %(common_tenant_id)s::bigint,
                    (SELECT id FROM tenants WHERE slug = 'system')),
           coalesce(queue, %(common_queue)s::text), coalesce(task, %(common_task)s::text), payload,
           coalesce(priority, %(common_priority)s::smallint),
           coalesce(max_attempts, %(common_max_attempts)s::int),
           coalesce(run_at, %(common_run_at)s::timestamptz,
                    now() + make_interval(secs => coalesce(delay, %(common_delay)s::float8))),
           %(trace_context)s::jsonb, coalesce(timeout_seconds, %(common_timeout)s::float8)
    FROM input
)
SELECT array_agg(id ORDER BY position) FROM input

-- name: job_insert_many_unique
-- Insert a batch of jobs some of which carry unique keys; returns every input's id in order and
-- the ids actually inserted (the others are duplicates of a live job's key). Its columns come
-- as job_insert_many's; into jobs_live, as job_insert.
WITH input AS MATERIALIZED (
    SELECT nextval('jobs_id_seq') AS id, batch.*
    FROM ROWS FROM (
        unnest(%(tenant_ids)b::bigint[]), unnest(%(queues)b::text[]), unnest(%(tasks)b::text[]),
        jsonb_array_elements(%(payloads)s::jsonb), unnest(%(priorities)b::smallint[]),
        unnest(%(max_attempts)b::int[]), unnest(%(delays)b::float8[]),
        unnest(%(run_ats)b::timestamptz[]), unnest(%(unique_keys)b::text[]),
        unnest(%(timeouts)b::float8[])
    ) WITH ORDINALITY AS batch (tenant_id, queue, task, payload, priority, max_attempts, delay,
                                run_at, unique_key, timeout_seconds, position)
), inserted AS (
    INSERT INTO jobs_live (id, tenant_id, queue, task, payload, priority, max_attempts,
                           available_at, unique_key, trace_context, timeout_seconds)
    SELECT id,
           coalesce(tenant_id, %(common_tenant_id)s::bigint,
                    (SELECT id FROM tenants WHERE slug = 'system')),
           coalesce(queue, %(common_queue)s::text), coalesce(task, %(common_task)s::text), payload,
           coalesce(priority, %(common_priority)s::smallint),
           coalesce(max_attempts, %(common_max_attempts)s::int),
           coalesce(run_at, %(common_run_at)s::timestamptz,
                    now() + make_interval(secs => coalesce(delay, %(common_delay)s::float8))),
           coalesce(unique_key, %(common_unique_key)s::text),
           %(trace_context)s::jsonb, coalesce(timeout_seconds, %(common_timeout)s::float8)
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
), locked_bucket AS MATERIALIZED (
    -- A rate-limited queue's token bucket (see queue_rate_limit_set), locked so that claims of
    -- that queue take turns here; an unlimited queue has no row here and locks nothing.
    SELECT rate_limit, rate_period_seconds, rate_tokens, rate_refilled_at
    FROM queues
    WHERE name = %(queue)s AND rate_limit IS NOT NULL
    FOR UPDATE
), bucket AS MATERIALIZED (
    -- Refilled up to the time the lock was held (clock_timestamp(), not the statement's now():
    -- a claim that waited for the lock must not count time before the last claim's refill).
    -- It holds at most a quarter of the limit (at least one): the most a burst adds to a period.
    SELECT least(greatest(rate_limit / 4.0, 1)::float8,
                 rate_tokens + greatest(extract(epoch FROM clock_timestamp() - rate_refilled_at),
                                        0)::float8 * rate_limit / rate_period_seconds) AS tokens,
           greatest(clock_timestamp(), rate_refilled_at) AS at
    FROM locked_bucket
), allowed AS MATERIALIZED (
    -- least() ignores a NULL: without a limit, the slots asked for
    SELECT least(%(limit)s, (SELECT greatest(floor(tokens), 0)::int FROM bucket)) AS slots
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
    LIMIT (SELECT slots FROM allowed)
), spent AS (
    UPDATE queues
    SET rate_tokens = bucket.tokens - (SELECT count(*) FROM picked),
        rate_refilled_at = bucket.at
    FROM bucket
    WHERE queues.name = %(queue)s
)
-- The picked jobs are looked up by id. Joined to picked instead, the planner, which cannot see
-- how few a claim picks, hashed the whole live table once the queue was long: 13 ms a claim
-- against 0.9 with 50,000 jobs waiting (tests/jobqueue/test_claim.py).
UPDATE jobs
SET state = 'running',
    attempt = jobs.attempt + 1,
    locked_by = %(worker)s,
    started_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::float8)
WHERE jobs.id = ANY (ARRAY(SELECT id FROM picked))
  AND jobs.state IN ('available', 'running')  -- see job_finish
RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.task, jobs.payload, jobs.priority,
          jobs.attempt, jobs.max_attempts, jobs.available_at, jobs.started_at, jobs.trace_context,
          jobs.timeout_seconds

-- name: job_claim_fair
-- Claim as job_claim does, but in fair shares between the tenants with waiting jobs in the queue:
-- the recursive CTE walks the queue's distinct tenants (one probe of jobs_claim_tenant_idx
-- each), each tenant gets ceil(limit / tenants) of the slots, and within a tenant jobs are taken
-- in (priority, available_at, id) order. The round starts at a random tenant, so that with more
-- tenants than slots each is served in turn over successive claims. A burst of one tenant then
-- delays the others by about one claim, not by the burst. Within a tenant, as job_claim does
-- within the queue, a second recursive CTE walks the tenant's distinct priorities, so that each
-- priority's index range stops at its first job not yet visible: scheduled and backing-off jobs
-- are never walked (taken in one range ordered by priority, a claim that found fewer visible
-- jobs than its share read every scheduled job of the tenant: 2.5 ms a claim with 50,000 of
-- them, against 0.45 for job_claim; tests/jobqueue/test_claim.py).
WITH RECURSIVE tenants AS (
    (SELECT tenant_id FROM jobs
     WHERE state = 'available' AND queue = %(queue)s
     ORDER BY tenant_id LIMIT 1)
    UNION ALL
    SELECT (SELECT next.tenant_id FROM jobs AS next
            WHERE next.state = 'available' AND next.queue = %(queue)s
              AND next.tenant_id > tenants.tenant_id
            ORDER BY next.tenant_id LIMIT 1)
    FROM tenants
    WHERE tenants.tenant_id IS NOT NULL
), waiting AS MATERIALIZED (
    SELECT tenant_id, row_number() OVER (ORDER BY tenant_id) AS position,
           count(*) OVER () AS tenants
    FROM tenants
    WHERE tenant_id IS NOT NULL
), locked_bucket AS MATERIALIZED (
    -- A rate-limited queue's token bucket (see queue_rate_limit_set), locked so that claims of
    -- that queue take turns here; an unlimited queue has no row here and locks nothing.
    SELECT rate_limit, rate_period_seconds, rate_tokens, rate_refilled_at
    FROM queues
    WHERE name = %(queue)s AND rate_limit IS NOT NULL
    FOR UPDATE
), bucket AS MATERIALIZED (
    -- Refilled up to the time the lock was held (clock_timestamp(), not the statement's now():
    -- a claim that waited for the lock must not count time before the last claim's refill).
    -- It holds at most a quarter of the limit (at least one): the most a burst adds to a period.
    SELECT least(greatest(rate_limit / 4.0, 1)::float8,
                 rate_tokens + greatest(extract(epoch FROM clock_timestamp() - rate_refilled_at),
                                        0)::float8 * rate_limit / rate_period_seconds) AS tokens,
           greatest(clock_timestamp(), rate_refilled_at) AS at
    FROM locked_bucket
), allowed AS MATERIALIZED (
    -- least() ignores a NULL: without a limit, the slots asked for
    SELECT least(%(limit)s, (SELECT greatest(floor(tokens), 0)::int FROM bucket)) AS slots
), turn AS MATERIALIZED (
    SELECT waiting.tenant_id, ceil(allowed.slots::float8 / waiting.tenants)::int AS share
    FROM waiting, allowed, (SELECT random() AS spin) AS wheel
    ORDER BY mod(waiting.position + floor(wheel.spin * waiting.tenants)::bigint, waiting.tenants)
), picked AS MATERIALIZED (
    SELECT visible.id
    FROM turn
    CROSS JOIN LATERAL (
        WITH RECURSIVE priorities AS (
            (SELECT priority FROM jobs
             WHERE state = 'available' AND queue = %(queue)s AND tenant_id = turn.tenant_id
             ORDER BY priority LIMIT 1)
            UNION ALL
            SELECT (SELECT next.priority FROM jobs AS next
                    WHERE next.state = 'available' AND next.queue = %(queue)s
                      AND next.tenant_id = turn.tenant_id
                      AND next.priority > priorities.priority
                    ORDER BY next.priority LIMIT 1)
            FROM priorities
            WHERE priorities.priority IS NOT NULL
        )
        SELECT ready.id
        FROM priorities
        CROSS JOIN LATERAL (
            SELECT id
            FROM jobs
            WHERE state = 'available'
              AND queue = %(queue)s
              AND tenant_id = turn.tenant_id
              AND priority = priorities.priority
              AND available_at <= now()
            ORDER BY available_at, id
            LIMIT turn.share
            FOR UPDATE SKIP LOCKED
        ) AS ready
        LIMIT turn.share
    ) AS visible
    WHERE NOT EXISTS (SELECT 1 FROM queues WHERE name = %(queue)s AND paused)
    LIMIT (SELECT slots FROM allowed)
), spent AS (
    UPDATE queues
    SET rate_tokens = bucket.tokens - (SELECT count(*) FROM picked),
        rate_refilled_at = bucket.at
    FROM bucket
    WHERE queues.name = %(queue)s
)
-- The picked jobs are looked up by id. Joined to picked instead, the planner, which cannot see
-- how few a claim picks, hashed the whole live table once the queue was long: 13 ms a claim
-- against 0.9 with 50,000 jobs waiting (tests/jobqueue/test_claim.py).
UPDATE jobs
SET state = 'running',
    attempt = jobs.attempt + 1,
    locked_by = %(worker)s,
    started_at = now(),
    lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::float8)
WHERE jobs.id = ANY (ARRAY(SELECT id FROM picked))
  AND jobs.state IN ('available', 'running')  -- see job_finish
RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.task, jobs.payload, jobs.priority,
          jobs.attempt, jobs.max_attempts, jobs.available_at, jobs.started_at, jobs.trace_context,
          jobs.timeout_seconds

-- name: job_claim_sole
-- The listener's claim when a notification wakes it, tried before the full claim. When the
-- queue holds one visible job, job_claim and job_claim_fair claim that job (unless it is locked
-- by another claim or the queue is paused), whatever else is scheduled: this does the same
-- without their walks of tenants and priorities. It reads the queue's first two entries of the
-- claim index (`lead`, `trail`): a lead alone is the queue's one job; behind a visible lead, a
-- trail not yet visible at the same priority means none of that priority is, and one more
-- probe finds whether any job waits at a later priority. Then it locks and marks the lead by
-- id. Otherwise (two visible jobs, a scheduled lead, a job at a later priority), or for a queue
-- with a rate limit (whose bucket only the full claims spend), it claims nothing and returns
-- fallback = true: the caller runs the full claim. A job being claimed elsewhere counts, from
-- the statement's snapshot. One row: the claimed job's columns (NULLs for none), then
-- fallback.
WITH seen AS MATERIALIZED (
    -- in the claim index's order, which keeps a generic plan on that index: unordered, one
    -- planned for any queue read the table from its start (667 pages with 40,000 jobs of
    -- another queue waiting, tests/jobqueue/test_claim.py)
    SELECT id, priority, available_at, available_at <= now() AS visible
    FROM jobs
    WHERE state = 'available' AND queue = %(queue)s
    ORDER BY priority, available_at, id
    LIMIT 2
), lead AS MATERIALIZED (
    SELECT * FROM seen ORDER BY priority, available_at, id LIMIT 1
), trail AS MATERIALIZED (
    SELECT * FROM seen ORDER BY priority, available_at, id OFFSET 1
), queue_row AS MATERIALIZED (
    SELECT bool_or(paused) AS paused, bool_or(rate_limit IS NOT NULL) AS limited
    FROM queues
    WHERE name = %(queue)s
), decided AS MATERIALIZED (
    SELECT coalesce((SELECT limited FROM queue_row), false)
           OR coalesce((SELECT NOT lead.visible OR trail.visible
                               OR EXISTS (SELECT 1 FROM jobs AS later
                                          WHERE later.state = 'available'
                                            AND later.queue = %(queue)s
                                            AND later.priority > lead.priority)
                        FROM lead, trail), false)
           AS fallback
), claimed AS (
    UPDATE jobs
    SET state = 'running',
        attempt = jobs.attempt + 1,
        locked_by = %(worker)s,
        started_at = now(),
        lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::float8)
    WHERE jobs.id = ANY (ARRAY(
            SELECT sole.id
            FROM jobs AS sole
            WHERE sole.id = ANY (ARRAY(SELECT id FROM lead))
              AND sole.state = 'available'
              AND sole.available_at <= now()
              AND NOT (SELECT fallback FROM decided)
              AND NOT coalesce((SELECT paused FROM queue_row), false)
            FOR UPDATE SKIP LOCKED))
      AND jobs.state IN ('available', 'running')  -- see job_finish
    RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.task, jobs.payload, jobs.priority,
              jobs.attempt, jobs.max_attempts, jobs.available_at, jobs.started_at,
              jobs.trace_context, jobs.timeout_seconds
)
SELECT claimed.*, decided.fallback FROM decided LEFT JOIN claimed ON true

-- name: job_finish
-- Record a batch of attempt results, fenced by (id, attempt, locked_by); write each attempt's
-- row and count the outcomes in job_stats_minute, all in this one statement. Rows are locked
-- first (`locked`), one look-up by id per result in the order given, which JobStore sorts by
-- id, so no two multi-row writes can wait on each other in a cycle; the fence names no state:
-- the CHECK jobs_running_has_lease_check makes locked_by imply 'running'. The lock holds what
-- the fence checked until the update. Driving the batch through a LATERAL look-up leaves the
-- planner no join order to choose: statistics that knew no running job (taken of the empty
-- table at migration, or with autovacuum off) once made it guess one row of this worker and
-- join the batch to the worker's running rows in a nested loop, n x r rows, seconds for 1,000
-- results (tests/jobqueue/test_batch_plans.py). Likewise job_release and job_extend_leases.
-- Returns the results written; what became of the others is job_result_fates's answer.
-- The lock and the update name the states of jobs_live, exactly its partition's list: the
-- planner reads that partition alone, by its id index. (`state = 'running'` would also prune,
-- but it matches jobs_lease_idx's predicate, and with stale statistics the planner was seen to
-- look ids up in that index, or in jobs_claim_tenant_idx for the claim's `state = 'available'`,
-- by reading it whole: 4 ms a row.) Likewise in the claim, job_release, job_extend_leases and
-- job_rescue_expired.
WITH result AS (
    SELECT *
    FROM unnest(
        %(ids)b::bigint[], %(attempts)b::int[], %(outcomes)b::text[], %(errors)b::text[],
        %(tracebacks)b::text[], %(retry_delays)b::float8[], %(durations)b::float8[],
        %(trace_ids)b::text[]
    ) AS result (id, attempt, outcome, error, traceback, retry_delay, duration, trace_id)
), locked AS MATERIALIZED (
    SELECT result.*, held.visible_at
    FROM result
    CROSS JOIN LATERAL (
        SELECT jobs.available_at AS visible_at
        FROM jobs
        WHERE jobs.id = result.id AND jobs.state IN ('available', 'running')
          AND jobs.attempt = result.attempt AND jobs.locked_by = %(worker)s
        FOR UPDATE
    ) AS held
), finished AS (
    UPDATE jobs
    SET state = CASE
            WHEN locked.outcome = 'succeeded' THEN 'succeeded'
            -- asked to cancel: whatever else the attempt ended with, no retry
            WHEN locked.outcome = 'cancelled' OR jobs.cancel_requested_at IS NOT NULL
                THEN 'cancelled'
            WHEN locked.outcome = 'dead' OR jobs.attempt >= jobs.max_attempts THEN 'dead'
            ELSE 'available'
        END,
        available_at = CASE
            WHEN locked.outcome IN ('failed', 'timed_out') AND jobs.attempt < jobs.max_attempts
                 AND jobs.cancel_requested_at IS NULL
                THEN now() + make_interval(secs => locked.retry_delay)
            ELSE jobs.available_at
        END,
        finished_at = CASE
            WHEN locked.outcome IN ('failed', 'timed_out') AND jobs.attempt < jobs.max_attempts
                 AND jobs.cancel_requested_at IS NULL
                THEN NULL
            ELSE now()
        END,
        last_error = coalesce(locked.error, jobs.last_error),
        locked_by = NULL,
        lease_expires_at = NULL
    FROM locked
    WHERE jobs.id = locked.id AND jobs.state IN ('available', 'running')
    RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.attempt, jobs.started_at, jobs.state,
              locked.outcome, locked.error, locked.traceback, locked.duration, locked.trace_id,
              greatest(extract(epoch FROM jobs.started_at - locked.visible_at)::float8, 0)
                  AS wait
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              traceback, duration, trace_id)
    SELECT id, attempt, %(worker)s, started_at, now(),
           CASE WHEN outcome IN ('succeeded', 'timed_out', 'cancelled') THEN outcome
                ELSE 'failed' END,
           error, traceback, make_interval(secs => duration), trace_id
    FROM finished
), counted AS (
    INSERT INTO job_stats_minute AS stats (queue, minute, tenant_id, succeeded, failed, dead,
                                           runtime_sum, runtime_max, wait_sum, wait_max)
    SELECT queue, date_trunc('minute', now()), tenant_id,
           count(*) FILTER (WHERE state = 'succeeded'),
           count(*) FILTER (WHERE state = 'available'),
           count(*) FILTER (WHERE state = 'dead'),
           sum(duration), max(duration), sum(wait), max(wait)
    FROM finished
    GROUP BY queue, tenant_id
    ORDER BY queue, tenant_id
    ON CONFLICT (queue, minute, tenant_id) DO UPDATE
    SET succeeded = stats.succeeded + excluded.succeeded,
        failed = stats.failed + excluded.failed,
        dead = stats.dead + excluded.dead,
        runtime_sum = stats.runtime_sum + excluded.runtime_sum,
        runtime_max = greatest(stats.runtime_max, excluded.runtime_max),
        wait_sum = stats.wait_sum + excluded.wait_sum,
        wait_max = greatest(stats.wait_max, excluded.wait_max)
)
SELECT id, attempt, state FROM finished

-- name: job_result_fates
-- What became of the attempt results job_finish did not write (JobStore.finish runs this for
-- those only): 'written_before' (this worker's earlier try committed, its reply was lost) or
-- 'lost' (the lease was taken over), with the job's state now. It looks each job up in every
-- partition of jobs and its attempt in every partition of job_attempts, which the planner and
-- the executor's start-up pay for per partition, rows or not: as a part of job_finish (planned
-- per batch) it took 18 ms to plan and 6 ms to start with 38 history periods, against 0.6 ms and
-- 4 ms for the whole rest of the finish.
SELECT result.id, result.attempt, latest.state,
       CASE WHEN earlier.outcome IN ('succeeded', 'failed', 'timed_out', 'cancelled')
            THEN 'written_before' ELSE 'lost' END
FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS result (id, attempt)
LEFT JOIN LATERAL (SELECT state FROM jobs WHERE jobs.id = result.id LIMIT 1) AS latest ON true
LEFT JOIN LATERAL (
    SELECT outcome FROM job_attempts
    WHERE job_attempts.job_id = result.id AND job_attempts.attempt = result.attempt
      AND job_attempts.worker = %(worker)s
    LIMIT 1
) AS earlier ON true

-- name: job_release
-- Give jobs back at shutdown: unstarted ones as if never claimed, started ones as 'released'
-- (an attempt row, and a count in job_stats_minute). Rows are locked and fenced as in
-- job_finish; returns the jobs given back.
WITH handed_back AS (
    SELECT *
    FROM unnest(%(ids)s::bigint[], %(attempts)s::int[], %(started)s::bool[],
                %(durations)s::float8[])
        AS handed_back (id, attempt, started, duration)
), locked AS MATERIALIZED (
    SELECT handed_back.*
    FROM handed_back
    CROSS JOIN LATERAL (
        SELECT FROM jobs
        WHERE jobs.id = handed_back.id AND jobs.state IN ('available', 'running')
          AND jobs.attempt = handed_back.attempt AND jobs.locked_by = %(worker)s
        FOR UPDATE
    ) AS held
), released AS (
    UPDATE jobs
    -- A job someone asked to cancel is not given back: it ends cancelled.
    SET state = CASE WHEN jobs.cancel_requested_at IS NULL THEN 'available' ELSE 'cancelled' END,
        finished_at = CASE WHEN jobs.cancel_requested_at IS NULL THEN NULL ELSE now() END,
        -- An unstarted job keeps its place in line; a started one goes to the back.
        available_at = CASE WHEN locked.started THEN now() ELSE jobs.available_at END,
        attempt = CASE WHEN locked.started THEN jobs.attempt ELSE jobs.attempt - 1 END,
        -- A release is not a failure: the budget grows by the attempt it used.
        max_attempts = CASE WHEN locked.started THEN jobs.max_attempts + 1
                            ELSE jobs.max_attempts END,
        locked_by = NULL,
        lease_expires_at = NULL
    FROM locked
    WHERE jobs.id = locked.id AND jobs.state IN ('available', 'running')
    RETURNING jobs.id, jobs.tenant_id, jobs.queue, jobs.attempt, jobs.started_at,
              locked.started, locked.duration
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              duration)
    SELECT id, attempt, %(worker)s, started_at, now(), 'released',
           'released at worker shutdown before the job finished', make_interval(secs => duration)
    FROM released
    WHERE started
), counted AS (
    INSERT INTO job_stats_minute AS stats (queue, minute, tenant_id, released)
    SELECT queue, date_trunc('minute', now()), tenant_id, count(*)
    FROM released
    WHERE started
    GROUP BY queue, tenant_id
    ORDER BY queue, tenant_id
    ON CONFLICT (queue, minute, tenant_id) DO UPDATE
    SET released = stats.released + excluded.released
)
SELECT released.id, released.started, pg_notify('pauta_jobs', released.queue)
FROM released

-- name: job_extend_leases
-- Extend the leases of a worker's in-flight jobs. Every pair comes back with its fate:
-- 'extended'; 'cancel_requested' (extended, and someone asked to cancel the job: the heartbeat
-- carries the request back to the task); 'done' (this worker has written its result since, or
-- gave it back, or is writing it now); or 'lost' (rescued, or another worker holds the job
-- now). Rows are looked up and locked as in job_finish, but a row another transaction holds is
-- skipped, not waited for: it is nearly always this worker's completer moving the row to its
-- finished partition, and a heartbeat that waited for that got "tuple to be locked was already
-- moved to another partition" (40001) when the completer committed, again at every retry while
-- the completer kept finishing the jobs it held. In a 5,000,000-job soak the heartbeat failed
-- for 20 s at a time, the worker stopped claiming until a beat got through, and the drain fell
-- from 4,870 to 290-440 jobs/s. A skipped row is answered 'done'; its lease is extended by the
-- next beat if its result was not written. Skipping never waits, so no lock order is needed.
WITH held AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(attempts)s::int[]) AS held (id, attempt)
), locked AS MATERIALIZED (
    SELECT held.*
    FROM held
    CROSS JOIN LATERAL (
        SELECT FROM jobs
        WHERE jobs.id = held.id AND jobs.state IN ('available', 'running')
          AND jobs.attempt = held.attempt AND jobs.locked_by = %(worker)s
        FOR UPDATE SKIP LOCKED
    ) AS mine
), extended AS (
    UPDATE jobs
    SET lease_expires_at = now() + make_interval(secs => %(lease_seconds)s::float8)
    FROM locked
    WHERE jobs.id = locked.id AND jobs.state IN ('available', 'running')
    RETURNING jobs.id, jobs.attempt, jobs.cancel_requested_at
)
SELECT id, attempt,
       CASE WHEN cancel_requested_at IS NULL THEN 'extended' ELSE 'cancel_requested' END
FROM extended
UNION ALL
SELECT held.id, held.attempt,
       CASE WHEN rescued.found
                 OR latest.attempt > held.attempt
                 OR (latest.attempt = held.attempt AND latest.locked_by <> %(worker)s)
            THEN 'lost' ELSE 'done' END
FROM held
LEFT JOIN LATERAL (
    SELECT attempt, locked_by FROM jobs WHERE jobs.id = held.id LIMIT 1
) AS latest ON true
LEFT JOIN LATERAL (
    SELECT true AS found FROM job_attempts
    WHERE job_attempts.job_id = held.id AND job_attempts.attempt = held.attempt
      AND job_attempts.outcome = 'lease_expired'
    LIMIT 1
) AS rescued ON true
WHERE NOT EXISTS (
    SELECT FROM extended WHERE extended.id = held.id AND extended.attempt = held.attempt
)

-- name: job_rescue_expired
-- Return running jobs whose lease has expired to 'available' (or 'dead' when out of attempts),
-- with an attempt row and a count in job_stats_minute each. Any number of processes may run it
-- at once: SKIP LOCKED gives each expired row to one of them.
WITH expired AS MATERIALIZED (
    SELECT id, attempt, locked_by, started_at, lease_expires_at
    FROM jobs
    WHERE state = 'running' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
), rescued AS (
    UPDATE jobs
    SET state = CASE WHEN jobs.cancel_requested_at IS NOT NULL THEN 'cancelled'
                     WHEN jobs.attempt >= jobs.max_attempts THEN 'dead'
                     ELSE 'available' END,
        available_at = now(),
        finished_at = CASE WHEN jobs.cancel_requested_at IS NOT NULL
                             OR jobs.attempt >= jobs.max_attempts THEN now() END,
        last_error = 'LeaseExpired: worker ' || expired.locked_by
                     || ' stopped renewing its lease (crashed, killed, frozen or cut off)',
        locked_by = NULL,
        lease_expires_at = NULL
    FROM expired
    -- by id from the array too: the join alone let the planner hash the whole live table (see
    -- job_claim), 37 ms to rescue 1,000 jobs beside 50,000 waiting
    WHERE jobs.id = ANY (ARRAY(SELECT id FROM expired)) AND jobs.id = expired.id
      AND jobs.state IN ('available', 'running')
    RETURNING jobs.id, jobs.queue, jobs.tenant_id, jobs.state, jobs.last_error, expired.attempt,
              expired.locked_by, expired.started_at, expired.lease_expires_at
), history AS (
    INSERT INTO job_attempts (job_id, attempt, worker, started_at, finished_at, outcome, error,
                              duration)
    SELECT id, attempt, locked_by, started_at, now(), 'lease_expired', last_error,
           lease_expires_at - started_at
    FROM rescued
), counted AS (
    INSERT INTO job_stats_minute AS stats (queue, minute, tenant_id, failed, dead)
    SELECT queue, date_trunc('minute', now()), tenant_id,
           count(*) FILTER (WHERE state = 'available'), count(*) FILTER (WHERE state = 'dead')
    FROM rescued
    GROUP BY queue, tenant_id
    ORDER BY queue, tenant_id
    ON CONFLICT (queue, minute, tenant_id) DO UPDATE
    SET failed = stats.failed + excluded.failed,
        dead = stats.dead + excluded.dead
)
SELECT id, queue, state, locked_by, pg_notify('pauta_jobs', queue) FROM rescued

-- name: schedule_enqueue_due
-- Enqueue one job for each schedule whose time has come and move its next run one period on;
-- a leader's write, fenced by its term (see leader_elect). Returns (schedule, job id).
WITH leader AS MATERIALIZED (
    SELECT term FROM leaders
    WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()
    FOR SHARE
), due AS (
    SELECT name, queue, tenant_id FROM schedules
    WHERE next_run_at <= now() AND EXISTS (SELECT FROM leader)
    ORDER BY name
    FOR UPDATE SKIP LOCKED
), enqueued AS (
    INSERT INTO jobs (tenant_id, queue, task)
    SELECT tenant_id, queue, name FROM due
    RETURNING id, task
)
UPDATE schedules s SET next_run_at = now() + s.every, last_job_id = enqueued.id
FROM enqueued WHERE s.name = enqueued.task
RETURNING s.name, enqueued.id

-- name: job_prune
-- Delete one batch of the finished jobs that retention does not drop whole (see job_history):
-- dead jobs older than keep_dead, and succeeded or cancelled stragglers of jobs_done_default
-- (finished outside every partition) older than keep_succeeded, each with its attempts; and the
-- attempts in job_attempts_default whose job is gone. The partition upkeep deletes those of the
-- jobs it drops (history_partitions), so this sweep is a safety net: it looks only at attempts
-- older than both horizons (each candidate is looked up in every partition of jobs, and the
-- default holds the dead jobs' attempts for keep_dead). A leader's write, fenced by its term
-- (see leader_elect). Returns the jobs deleted.
WITH leader AS MATERIALIZED (
    SELECT term FROM leaders
    WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()
    FOR SHARE
), dead AS (
    DELETE FROM jobs_dead
    WHERE id IN (SELECT id
                 FROM jobs_dead
                 WHERE finished_at < now() - make_interval(secs => %(keep_dead_seconds)s::float8)
                   AND EXISTS (SELECT FROM leader)
                 LIMIT %(limit)s
                 FOR UPDATE SKIP LOCKED)
    RETURNING id
), stragglers AS (
    DELETE FROM jobs_done_default
    WHERE id IN (SELECT id
                 FROM jobs_done_default
                 WHERE finished_at
                       < now() - make_interval(secs => %(keep_succeeded_seconds)s::float8)
                   AND EXISTS (SELECT FROM leader)
                 LIMIT %(limit)s
                 FOR UPDATE SKIP LOCKED)
    RETURNING id
), deleted AS (
    SELECT id FROM dead UNION ALL SELECT id FROM stragglers
), their_attempts AS (
    DELETE FROM job_attempts USING deleted WHERE job_attempts.job_id = deleted.id
), orphans AS (
    DELETE FROM job_attempts_default
    WHERE (job_id, attempt) IN (
        SELECT orphan.job_id, orphan.attempt
        FROM job_attempts_default AS orphan
        WHERE orphan.finished_at < now() - make_interval(secs => greatest(
                  %(keep_succeeded_seconds)s::float8, %(keep_dead_seconds)s::float8))
          AND NOT EXISTS (SELECT FROM jobs WHERE jobs.id = orphan.job_id)
          AND EXISTS (SELECT FROM leader)
        LIMIT %(limit)s)
)
SELECT count(*) FROM deleted

-- name: job_history_fence
-- Hold the leader's term for the transaction of job_history (FOR SHARE: no new term can begin
-- before it commits); nothing comes back when the term is over.
SELECT term FROM leaders
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()
FOR SHARE

-- name: job_history
-- The history partitions of jobs_done and job_attempts: created from the current period to
-- ahead_seconds on, and dropped whole once all they hold is older than keep_seconds (see
-- history_partitions in migrations 0017, 0019 and 0020); run after job_history_fence, in its
-- transaction. Returns (action, partition) for each created or dropped.
SELECT action, partition
FROM history_partitions(%(period_seconds)s::float8, %(keep_seconds)s::float8, now(),
                        now() + make_interval(secs => %(ahead_seconds)s::float8))

-- name: job_requeue
-- Put a dead or cancelled job back to work now, with a fresh attempt budget; history is kept.
WITH requeued AS (
    UPDATE jobs
    SET state = 'available',
        available_at = now(),
        finished_at = NULL,
        cancel_requested_at = NULL,
        max_attempts = jobs.attempt + %(attempt_budget)s
    WHERE id = %(id)s AND state IN ('dead', 'cancelled')
    RETURNING id, queue
)
SELECT id, pg_notify('pauta_jobs', queue) FROM requeued

-- name: job_cancel
-- Withdraw a job that is waiting (now or scheduled) so it never runs, or ask a running one to
-- stop (its worker learns of it at its next heartbeat). Returns the job's state after: a waiting
-- job is 'cancelled' at once; a running one stays 'running' until its attempt ends.
UPDATE jobs
SET state = CASE WHEN state = 'available' THEN 'cancelled' ELSE state END,
    finished_at = CASE WHEN state = 'available' THEN now() ELSE finished_at END,
    cancel_requested_at = CASE WHEN state = 'running' THEN coalesce(cancel_requested_at, now())
                          END
WHERE id = %(id)s AND state IN ('available', 'running')
RETURNING id, state

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
       locked_by, last_error, unique_key, cancel_requested_at, timeout_seconds
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

-- name: queue_rate_limit_configure
-- At a worker's start: the limit pauta.toml gives a queue (NULL: none), unless the console set
-- one (rate_limit_set_by), which stays until cleared there.
INSERT INTO queues (name, rate_limit, rate_period_seconds)
VALUES (%(queue)s, %(rate_limit)s, %(period_seconds)s)
ON CONFLICT (name) DO UPDATE
SET rate_limit = excluded.rate_limit,
    rate_period_seconds = excluded.rate_period_seconds,
    rate_tokens = 0,  -- a new limit starts with an empty bucket: no burst at the change
    rate_refilled_at = clock_timestamp()
WHERE queues.rate_limit_set_by IS NULL
  AND (queues.rate_limit, queues.rate_period_seconds)
      IS DISTINCT FROM (excluded.rate_limit, excluded.rate_period_seconds)

-- name: queue_rate_limit_set
-- Set (or, with a NULL limit, clear) a queue's rate limit from the console; claims use it from
-- their next statement. A cleared limit goes back to what pauta.toml says at the next start.
INSERT INTO queues (name, rate_limit, rate_period_seconds, rate_limit_set_by)
VALUES (%(queue)s, %(rate_limit)s, %(period_seconds)s, %(set_by)s)
ON CONFLICT (name) DO UPDATE
SET rate_limit = excluded.rate_limit,
    rate_period_seconds = excluded.rate_period_seconds,
    rate_limit_set_by = excluded.rate_limit_set_by,
    rate_tokens = 0,  -- a new limit starts with an empty bucket: no burst at the change
    rate_refilled_at = clock_timestamp()
RETURNING name

-- name: queue_rate_limits
-- The rate limits of some queues (those without one are not listed), for the runner's pacing.
SELECT name, rate_limit, rate_period_seconds
FROM queues
WHERE name = ANY (%(queues)s::text[]) AND rate_limit IS NOT NULL

-- name: console_queue_rate
-- A queue's rate limit, and the attempts that ended per second over the last whole minute.
SELECT queues.rate_limit, queues.rate_period_seconds, queues.rate_limit_set_by,
       coalesce((SELECT sum(succeeded + failed + dead + released)
                 FROM job_stats_minute
                 WHERE queue = %(queue)s
                   AND minute = date_trunc('minute', now()) - interval '1 minute'), 0)::float8
           / 60 AS recent_rate
FROM queues
WHERE queues.name = %(queue)s

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

-- name: queue_depth_sample
-- Record every queue's depth per tenant for this minute; a leader's write, fenced by its term.
-- Each arm of the UNION reads one state through that state's partial index, so finished jobs
-- are never read, and all three are read in the statement's one snapshot.
WITH leader AS MATERIALIZED (
    SELECT term FROM leaders
    WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()
    FOR SHARE
), live AS (
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
WHERE EXISTS (SELECT FROM leader)
GROUP BY queue, tenant_id
ORDER BY queue, tenant_id
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
-- Delete per-minute stats, depth samples and stopped worker rows older than their retention
-- age; a leader's write, fenced by its term.
WITH leader AS MATERIALIZED (
    SELECT term FROM leaders
    WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()
    FOR SHARE
), old_stats AS (
    DELETE FROM job_stats_minute
    WHERE minute < now() - make_interval(secs => %(keep_seconds)s::float8)
      AND EXISTS (SELECT FROM leader)
), old_depth AS (
    DELETE FROM queue_depth_minute
    WHERE minute < now() - make_interval(secs => %(keep_seconds)s::float8)
      AND EXISTS (SELECT FROM leader)
)
DELETE FROM workers
WHERE state IN ('stopped', 'lost')
  AND last_heartbeat_at < now() - make_interval(secs => %(keep_seconds)s::float8)
  AND EXISTS (SELECT FROM leader)

-- name: worker_register
-- Register a supervisor or a queue child; returns its id.
INSERT INTO workers (name, hostname, pid, parent_id, queue, threads)
VALUES (%(name)s, %(hostname)s, %(pid)s, %(parent_id)s, %(queue)s, %(threads)s)
RETURNING id

-- name: worker_heartbeat
-- Record that a worker is alive, how many jobs it holds and how many threads it abandoned to
-- tasks past their timeout; returns whether a drain was asked.
UPDATE workers
SET last_heartbeat_at = now(),
    in_flight = %(in_flight)s,
    abandoned_threads = %(abandoned_threads)s,
    state = %(state)s  -- a worker marked lost that speaks again is back
WHERE id = %(id)s
RETURNING drain_requested_at IS NOT NULL

-- name: worker_set_state
-- Move a worker to draining or stopped.
UPDATE workers
SET state = %(state)s,
    in_flight = coalesce(%(in_flight)s, in_flight),
    abandoned_threads = coalesce(%(abandoned_threads)s, abandoned_threads),
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

-- name: leader_elect
-- Become the leader of a duty when nobody holds it or its lease has expired (a new term), or
-- renew this holder's own unexpired lease (the same term). Returns the term held, or nothing.
INSERT INTO leaders AS leader (name, holder, term, elected_at, renewed_at, expires_at)
VALUES (%(name)s, %(holder)s, 1, now(), now(),
        now() + make_interval(secs => %(ttl_seconds)s::float8))
ON CONFLICT (name) DO UPDATE
SET term = CASE WHEN leader.holder = excluded.holder AND leader.expires_at > now()
                THEN leader.term ELSE leader.term + 1 END,
    elected_at = CASE WHEN leader.holder = excluded.holder AND leader.expires_at > now()
                      THEN leader.elected_at ELSE now() END,
    holder = excluded.holder,
    renewed_at = now(),
    expires_at = excluded.expires_at
WHERE leader.expires_at <= now() OR leader.holder = excluded.holder
RETURNING term

-- name: leader_renew
-- Extend the lease of the term this holder believes it holds; nothing comes back when that term
-- is over (expired, or taken over), and the holder must step down.
UPDATE leaders
SET renewed_at = now(), expires_at = now() + make_interval(secs => %(ttl_seconds)s::float8)
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()
RETURNING term

-- name: leader_resign
-- Give up a term at shutdown, so that another process may lead at once.
UPDATE leaders
SET expires_at = now()
WHERE name = %(name)s AND holder = %(holder)s AND term = %(term)s AND expires_at > now()

-- name: autovacuum_gaps
-- The engine's churning tables that autovacuum will not vacuum, each with why.
SELECT c.relname,
       CASE WHEN NOT current_setting('autovacuum')::boolean THEN 'autovacuum = off on the server'
            WHEN NOT current_setting('track_counts')::boolean THEN 'track_counts = off on the server'
            ELSE 'autovacuum_enabled = off on the table'
       END AS reason
FROM pg_class c
WHERE c.oid IN ('jobs_live'::regclass, 'jobs_dead'::regclass, 'job_stats_minute'::regclass,
                'workers'::regclass, 'leaders'::regclass)
  AND (NOT current_setting('autovacuum')::boolean
       OR NOT current_setting('track_counts')::boolean
       OR EXISTS (SELECT 1 FROM unnest(c.reloptions) AS o(option)
                  WHERE o.option ~* '^autovacuum_enabled=(false|off|no|f|n|0)$'))
ORDER BY c.relname COLLATE "C"

-- name: hot_tables_vacuum
-- The leader's vacuum of the churning tables, where autovacuum does not run (not fenced: harmless twice).
VACUUM (SKIP_LOCKED, ANALYZE) jobs_live, jobs_dead, job_stats_minute, workers, leaders

-- name: live_table_dead_rows
-- Dead row versions in jobs_live as the statistics count them (each backend reports its own
-- within about a second; VACUUM sets what it left).
SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables
WHERE relid = 'jobs_live'::regclass

-- name: live_table_vacuum
-- The leader's vacuum of the claim's table when dead rows pile up between autovacuum's visits
-- (not fenced: harmless twice; SKIP_LOCKED: skipped while autovacuum is at work on it).
VACUUM (SKIP_LOCKED) jobs_live

-- name: live_table_has_statistics
-- Whether the claim's table has column statistics (pg_stats: what ANALYZE wrote). A new
-- database has none until autovacuum's first visit (a minute or more) or never, with autovacuum
-- off: meanwhile the planner guesses, and a soak's claims took 8 ms instead of 1.5.
SELECT EXISTS (SELECT FROM pg_stats
               JOIN pg_class ON pg_class.relname = pg_stats.tablename
               JOIN pg_namespace ON pg_namespace.oid = pg_class.relnamespace
                                AND pg_namespace.nspname = pg_stats.schemaname
               WHERE pg_class.oid = 'jobs_live'::regclass)

-- name: live_table_vacuum_analyze
-- live_table_vacuum for a claim's table without statistics yet: with ANALYZE.
VACUUM (SKIP_LOCKED, ANALYZE) jobs_live

-- name: live_table_outgrown
-- Whether jobs_live holds far more rows than its statistics say: at least :rows, and more than
-- twice the rows its last ANALYZE counted (reltuples; -1 before the first). After a burst into a
-- near-empty queue the planner believes in a table of a few rows until ANALYZE, which
-- autovacuum does at its next visit (a minute or more; never with it off), and on that belief
-- the fair claim's walk over the queue's tenants read every waiting job of the queue at each
-- claim: 40,000 rows and 6-7 ms a claim with 20,000 jobs waiting
-- (tests/jobqueue/test_batch_plans.py).
-- n_live_tup follows inserts and deletes as backends report them (within about a second).
SELECT s.n_live_tup >= greatest(%(rows)s::bigint, 2 * greatest(c.reltuples, 0)::bigint)
FROM pg_class AS c
JOIN pg_stat_user_tables AS s ON s.relid = c.oid
WHERE c.oid = 'jobs_live'::regclass

-- name: live_table_analyze
-- The leader's ANALYZE of the claim's table once it has outgrown its statistics (not fenced:
-- harmless twice; SKIP_LOCKED: skipped while autovacuum is at work on it).
ANALYZE (SKIP_LOCKED) jobs_live

-- name: leader_current
-- Who leads a duty, in which term, and until when (database time).
SELECT holder, term, elected_at, renewed_at, expires_at, expires_at > now() AS live
FROM leaders
WHERE name = %(name)s

-- =============================================================================================
-- Console: inspection
-- What the admin console reads, and its bulk operations. A NULL tenant_id means every tenant.
-- Live counts read only the partial indexes of waiting, running and dead jobs, never finished
-- rows; outcomes, rates and times come from job_stats_minute, depth history from
-- queue_depth_minute. jobqueue.inspect.JobInspector runs the reads unprepared, so each is
-- planned with its parameters' values: a filter left NULL folds away, and a state asked for
-- lets the planner use that state's partial index.
-- =============================================================================================

-- name: console_queue_live
-- Per known queue: paused state, waiting, scheduled, running and dead jobs, the oldest waiting
-- job's age, the live worker processes that serve it, and how many run jobs at all.
WITH waiting AS (
    SELECT queue,
           count(*) FILTER (WHERE available_at <= now()) AS available,
           count(*) FILTER (WHERE available_at > now()) AS scheduled,
           min(available_at) FILTER (WHERE available_at <= now()) AS oldest_available_at
    FROM jobs
    WHERE state = 'available' AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
    GROUP BY queue
), running AS (
    SELECT queue, count(*) AS running
    FROM jobs
    WHERE state = 'running' AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
    GROUP BY queue
), dead AS (
    SELECT queue, count(*) AS dead
    FROM jobs
    WHERE state = 'dead' AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
    GROUP BY queue
), serving AS (
    SELECT served.queue, count(*) AS workers
    FROM workers
    CROSS JOIN LATERAL unnest(string_to_array(workers.queue, ',')) AS served (queue)
    WHERE workers.state IN ('running', 'draining')
      AND workers.last_heartbeat_at > now() - make_interval(secs => %(live_within_seconds)s)
    GROUP BY served.queue
)
SELECT queues.name AS queue, queues.paused, queues.paused_at, queues.paused_by,
       coalesce(waiting.available, 0) AS available, coalesce(waiting.scheduled, 0) AS scheduled,
       coalesce(running.running, 0) AS running, coalesce(dead.dead, 0) AS dead,
       extract(epoch FROM now() - waiting.oldest_available_at)::float8 AS oldest_waiting_seconds,
       coalesce(serving.workers, 0) AS live_workers,
       (SELECT count(*)
        FROM workers
        WHERE workers.queue IS NOT NULL AND workers.state IN ('running', 'draining')
          AND workers.last_heartbeat_at > now() - make_interval(secs => %(live_within_seconds)s))
           AS live_processes
FROM queues
LEFT JOIN waiting ON waiting.queue = queues.name
LEFT JOIN running ON running.queue = queues.name
LEFT JOIN dead ON dead.queue = queues.name
LEFT JOIN serving ON serving.queue = queues.name
WHERE %(queue)s::text IS NULL OR queues.name = %(queue)s
ORDER BY queues.name

-- name: console_queue_tenants
-- One queue's waiting (visible) and running jobs per tenant, most waiting first: the waiting ones
-- from jobs_claim_tenant_idx alone, the running ones through the lease index.
WITH live AS (
    SELECT tenant_id, true AS waiting
    FROM jobs
    WHERE state = 'available' AND queue = %(queue)s AND available_at <= now()
      AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
    UNION ALL
    SELECT tenant_id, false
    FROM jobs
    WHERE state = 'running' AND queue = %(queue)s
      AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
), counted AS (
    SELECT tenant_id, count(*) FILTER (WHERE waiting) AS waiting,
           count(*) FILTER (WHERE NOT waiting) AS running
    FROM live
    GROUP BY tenant_id
)
SELECT tenants.slug AS tenant, tenants.name AS tenant_name, counted.waiting, counted.running
FROM counted
JOIN tenants ON tenants.id = counted.tenant_id
ORDER BY counted.waiting DESC, counted.running DESC, tenants.slug
LIMIT %(limit)s

-- name: console_queue_outcomes
-- Per queue: outcomes over the last 1, 5 and 60 whole minutes plus the current one, and run and
-- wait times over the last 5; with how far the current minute has gone, to turn counts into rates.
SELECT queue,
       sum(succeeded) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '1 minute')
           AS succeeded_1m,
       sum(failed) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '1 minute')
           AS failed_1m,
       sum(dead) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '1 minute')
           AS dead_1m,
       sum(succeeded) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS succeeded_5m,
       sum(failed) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS failed_5m,
       sum(dead) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS dead_5m,
       sum(succeeded) AS succeeded_60m, sum(failed) AS failed_60m, sum(dead) AS dead_60m,
       sum(runtime_sum) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS runtime_sum_5m,
       max(runtime_max) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS runtime_max_5m,
       sum(wait_sum) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS wait_sum_5m,
       max(wait_max) FILTER (WHERE minute >= date_trunc('minute', now()) - interval '5 minutes')
           AS wait_max_5m,
       extract(epoch FROM now() - date_trunc('minute', now()))::float8 AS into_minute_seconds
FROM job_stats_minute
WHERE minute >= date_trunc('minute', now()) - interval '60 minutes'
  AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s)
GROUP BY queue
ORDER BY queue

-- name: console_stats_series
-- Outcomes, run and wait times per time bucket over a window, for one queue or all; buckets
-- with nothing recorded come back as zeros.
WITH span AS (
    SELECT make_interval(secs => %(bucket_seconds)s) AS bucket,
           date_bin(make_interval(secs => %(bucket_seconds)s),
                    now() - make_interval(secs => %(window_seconds)s),
                    TIMESTAMPTZ '2000-01-01 00:00:00+00') AS first_bucket
), buckets AS (
    SELECT generate_series(span.first_bucket, now(), span.bucket) AS bucket FROM span
), stats AS (
    SELECT date_bin(span.bucket, stats.minute, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
           sum(stats.succeeded) AS succeeded, sum(stats.failed) AS failed,
           sum(stats.dead) AS dead, sum(stats.runtime_sum) AS runtime_sum,
           max(stats.runtime_max) AS runtime_max, sum(stats.wait_sum) AS wait_sum,
           max(stats.wait_max) AS wait_max
    FROM job_stats_minute AS stats, span
    WHERE stats.minute >= span.first_bucket
      AND (%(queue)s::text IS NULL OR stats.queue = %(queue)s)
      AND (%(tenant_id)s::bigint IS NULL OR stats.tenant_id = %(tenant_id)s)
    GROUP BY 1
)
SELECT buckets.bucket, coalesce(stats.succeeded, 0) AS succeeded,
       coalesce(stats.failed, 0) AS failed, coalesce(stats.dead, 0) AS dead,
       stats.runtime_sum / nullif(stats.succeeded + stats.failed + stats.dead, 0) AS runtime_avg,
       stats.runtime_max,
       stats.wait_sum / nullif(stats.succeeded + stats.failed + stats.dead, 0) AS wait_avg,
       stats.wait_max
FROM buckets
LEFT JOIN stats ON stats.bucket = buckets.bucket
ORDER BY buckets.bucket

-- name: console_depth_series
-- Queue depth per time bucket over a window, for one queue or all: each minute's samples summed
-- over tenants (and queues), then the largest minute of each bucket; NULL where none was taken.
WITH span AS (
    SELECT make_interval(secs => %(bucket_seconds)s) AS bucket,
           date_bin(make_interval(secs => %(bucket_seconds)s),
                    now() - make_interval(secs => %(window_seconds)s),
                    TIMESTAMPTZ '2000-01-01 00:00:00+00') AS first_bucket
), buckets AS (
    SELECT generate_series(span.first_bucket, now(), span.bucket) AS bucket FROM span
), per_minute AS (
    SELECT depth.minute, sum(depth.available) AS available, sum(depth.scheduled) AS scheduled,
           sum(depth.running) AS running, sum(depth.dead) AS dead
    FROM queue_depth_minute AS depth, span
    WHERE depth.minute >= span.first_bucket
      AND (%(queue)s::text IS NULL OR depth.queue = %(queue)s)
      AND (%(tenant_id)s::bigint IS NULL OR depth.tenant_id = %(tenant_id)s)
    GROUP BY depth.minute
), binned AS (
    SELECT date_bin(span.bucket, per_minute.minute, TIMESTAMPTZ '2000-01-01 00:00:00+00') AS bucket,
           max(available) AS available, max(scheduled) AS scheduled, max(running) AS running,
           max(dead) AS dead
    FROM per_minute, span
    GROUP BY 1
)
SELECT buckets.bucket, binned.available, binned.scheduled, binned.running, binned.dead
FROM buckets
LEFT JOIN binned ON binned.bucket = buckets.bucket
ORDER BY buckets.bucket

-- name: console_job_list
-- One page of jobs, newest first (keyset on id), by any mix of state, visibility, queue, task,
-- tenant, text in the last error (an ILIKE pattern), a payload key's value, and a lowest id.
SELECT jobs.id, jobs.tenant_id, tenants.slug AS tenant, jobs.queue, jobs.task,
       CASE WHEN jobs.state = 'available' AND jobs.available_at > now() THEN 'scheduled'
            ELSE jobs.state END AS state,
       jobs.attempt, jobs.max_attempts, jobs.priority, jobs.created_at, jobs.available_at,
       jobs.finished_at, left(jobs.last_error, 200) AS last_error,
       left(jobs.payload::text, 120) AS payload_preview
FROM jobs
JOIN tenants ON tenants.id = jobs.tenant_id
WHERE (%(before_id)s::bigint IS NULL OR jobs.id < %(before_id)s)
  AND (%(state)s::text IS NULL OR jobs.state = %(state)s)
  AND (%(visible)s::boolean IS NULL OR (jobs.available_at <= now()) = %(visible)s)
  AND (%(queue)s::text IS NULL OR jobs.queue = %(queue)s)
  AND (%(task)s::text IS NULL OR jobs.task = %(task)s)
  AND (%(tenant_id)s::bigint IS NULL OR jobs.tenant_id = %(tenant_id)s)
  AND (%(error_pattern)s::text IS NULL OR jobs.last_error ILIKE %(error_pattern)s)
  AND (%(payload_key)s::text IS NULL OR jobs.payload ->> %(payload_key)s = %(payload_value)s)
  AND (%(min_id)s::bigint IS NULL OR jobs.id >= %(min_id)s)
ORDER BY jobs.id DESC
LIMIT %(limit)s

-- name: console_search_facts
-- What bounds a search of the job list: whether the error filter has its trigram index
-- (migration 0009_console_search, where pg_trgm exists), and the newest job's id.
SELECT to_regclass('jobs_error_search_idx') IS NOT NULL AS error_indexed,
       (SELECT max(id) FROM jobs) AS newest_id

-- name: console_job_detail
-- One job with what explains its state: the database's time, its queue's pause, the live
-- workers serving its queue, and its payload pretty-printed up to a length.
SELECT jobs.id, jobs.tenant_id, tenants.slug AS tenant, tenants.name AS tenant_name,
       jobs.queue, jobs.task, jobs.priority, jobs.state, jobs.attempt, jobs.max_attempts,
       jobs.available_at, jobs.created_at, jobs.started_at, jobs.finished_at,
       jobs.lease_expires_at, jobs.locked_by, jobs.last_error, jobs.unique_key, now() AS now,
       jobs.cancel_requested_at, jobs.timeout_seconds,
       queues.rate_limit AS queue_rate_limit, queues.rate_period_seconds AS queue_rate_period,
       left(jsonb_pretty(jobs.payload), %(payload_chars)s) AS payload_text,
       length(jsonb_pretty(jobs.payload)) AS payload_length,
       coalesce(queues.paused, false) AS queue_paused, queues.paused_at AS queue_paused_at,
       queues.paused_by AS queue_paused_by,
       (SELECT count(*)
        FROM workers
        WHERE workers.state IN ('running', 'draining')
          AND workers.last_heartbeat_at > now() - make_interval(secs => %(live_within_seconds)s)
          AND jobs.queue = ANY (string_to_array(workers.queue, ','))) AS live_workers
FROM jobs
JOIN tenants ON tenants.id = jobs.tenant_id
LEFT JOIN queues ON queues.name = jobs.queue
WHERE jobs.id = %(id)s AND (%(tenant_id)s::bigint IS NULL OR jobs.tenant_id = %(tenant_id)s)

-- name: console_job_payload
-- One job's whole payload, pretty-printed.
SELECT jsonb_pretty(payload)
FROM jobs
WHERE id = %(id)s AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)

-- name: console_scheduled_list
-- One page of jobs not visible yet (scheduled, or backing off before a retry), soonest first,
-- keyset on (available_at, id).
SELECT jobs.id, jobs.tenant_id, tenants.slug AS tenant, jobs.queue, jobs.task, jobs.attempt,
       jobs.max_attempts, jobs.priority, jobs.created_at, jobs.available_at,
       left(jobs.last_error, 200) AS last_error, left(jobs.payload::text, 120) AS payload_preview
FROM jobs
JOIN tenants ON tenants.id = jobs.tenant_id
WHERE jobs.state = 'available' AND jobs.available_at > now()
  AND (%(after_at)s::timestamptz IS NULL
       OR (jobs.available_at, jobs.id) > (%(after_at)s::timestamptz, %(after_id)s::bigint))
  AND (%(queue)s::text IS NULL OR jobs.queue = %(queue)s)
  AND (%(tenant_id)s::bigint IS NULL OR jobs.tenant_id = %(tenant_id)s)
ORDER BY jobs.available_at, jobs.id
LIMIT %(limit)s

-- name: console_failure_groups
-- Dead jobs grouped by fingerprint (task and job_error_pattern of the last error), largest group
-- first, with first and last seen, the newest job and an example of the error. The recursive
-- CTE walks jobs_dead_fingerprint_idx from one distinct fingerprint to the next (one probe
-- each), and each group is counted from its range of that index, so no error is pattern-matched
-- again here: the index holds every dead job's fingerprint.
WITH RECURSIVE fingerprints AS (
    (SELECT md5(task || E'\n' || job_error_pattern(last_error)) AS fingerprint
     FROM jobs
     WHERE state = 'dead'
     ORDER BY md5(task || E'\n' || job_error_pattern(last_error))
     LIMIT 1)
    UNION ALL
    SELECT (SELECT md5(next.task || E'\n' || job_error_pattern(next.last_error))
            FROM jobs AS next
            WHERE next.state = 'dead'
              AND md5(next.task || E'\n' || job_error_pattern(next.last_error))
                  > fingerprints.fingerprint
            ORDER BY md5(next.task || E'\n' || job_error_pattern(next.last_error))
            LIMIT 1)
    FROM fingerprints
    WHERE fingerprints.fingerprint IS NOT NULL
), groups AS (
    SELECT fingerprints.fingerprint, counted.*
    FROM fingerprints
    CROSS JOIN LATERAL (
        SELECT count(*) AS jobs, min(finished_at) AS first_seen, max(finished_at) AS last_seen,
               max(id) AS newest_id, array_agg(DISTINCT queue ORDER BY queue) AS queues
        FROM jobs
        WHERE state = 'dead'
          AND md5(task || E'\n' || job_error_pattern(last_error)) = fingerprints.fingerprint
          AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
          AND (%(queue)s::text IS NULL OR queue = %(queue)s)
    ) AS counted
    WHERE fingerprints.fingerprint IS NOT NULL AND counted.jobs > 0
    ORDER BY counted.jobs DESC, counted.last_seen DESC
    LIMIT %(limit)s
)
SELECT groups.*, newest.task, job_error_pattern(newest.last_error) AS pattern,
       split_part(job_error_pattern(newest.last_error), ':', 1) AS error_class,
       left(newest.last_error, 500) AS example
FROM groups
JOIN jobs AS newest ON newest.id = groups.newest_id AND newest.state = 'dead'
ORDER BY groups.jobs DESC, groups.last_seen DESC

-- name: console_failure_group
-- One failure group's summary, read from its range of jobs_dead_fingerprint_idx.
WITH counted AS (
    SELECT count(*) AS jobs, min(finished_at) AS first_seen, max(finished_at) AS last_seen,
           max(id) AS newest_id, array_agg(DISTINCT queue ORDER BY queue) AS queues
    FROM jobs
    WHERE state = 'dead'
      AND md5(task || E'\n' || job_error_pattern(last_error)) = %(fingerprint)s
      AND (%(tenant_id)s::bigint IS NULL OR tenant_id = %(tenant_id)s)
)
SELECT %(fingerprint)s::text AS fingerprint, counted.*, newest.task,
       job_error_pattern(newest.last_error) AS pattern,
       split_part(job_error_pattern(newest.last_error), ':', 1) AS error_class,
       left(newest.last_error, 500) AS example
FROM counted
JOIN jobs AS newest ON newest.id = counted.newest_id AND newest.state = 'dead'

-- name: console_failure_group_jobs
-- The dead jobs of one fingerprint, newest first (keyset on id, along jobs_dead_fingerprint_idx);
-- optionally only those up to a job id (what a confirmation showed) or among given ids.
SELECT jobs.id, jobs.tenant_id, tenants.slug AS tenant, jobs.queue, jobs.task, jobs.attempt,
       jobs.max_attempts, jobs.finished_at, left(jobs.last_error, 500) AS last_error,
       left(jobs.payload::text, 120) AS payload_preview
FROM jobs
JOIN tenants ON tenants.id = jobs.tenant_id
WHERE jobs.state = 'dead'
  AND md5(jobs.task || E'\n' || job_error_pattern(jobs.last_error)) = %(fingerprint)s
  AND (%(tenant_id)s::bigint IS NULL OR jobs.tenant_id = %(tenant_id)s)
  AND (%(max_id)s::bigint IS NULL OR jobs.id <= %(max_id)s)
  AND (%(ids)s::bigint[] IS NULL OR jobs.id = ANY (%(ids)s::bigint[]))
  AND (%(before_id)s::bigint IS NULL OR jobs.id < %(before_id)s)
ORDER BY jobs.id DESC
LIMIT %(limit)s

-- name: console_worker_list
-- Worker processes, each supervisor followed by its children: the live ones and those heard
-- from in the last day, with the running jobs each still holds.
WITH holding AS (
    SELECT locked_by, count(*) AS jobs FROM jobs WHERE state = 'running' GROUP BY locked_by
)
SELECT workers.id, workers.name, workers.hostname, workers.pid, workers.parent_id,
       workers.queue, workers.threads, workers.state, workers.in_flight,
       workers.abandoned_threads, workers.started_at,
       workers.last_heartbeat_at,
       extract(epoch FROM now() - workers.last_heartbeat_at)::float8 AS silent_seconds,
       workers.drain_requested_at, workers.drain_requested_by, workers.stopped_at,
       coalesce(holding.jobs, 0) AS holding
FROM workers
LEFT JOIN holding ON holding.locked_by = workers.name
WHERE workers.state IN ('running', 'draining')
   OR workers.last_heartbeat_at > now() - interval '1 day'
ORDER BY coalesce(workers.parent_id, workers.id) DESC, workers.parent_id NULLS FIRST,
         workers.queue, workers.id
LIMIT %(limit)s

-- name: job_requeue_many
-- Requeue dead or cancelled jobs now, each with its attempt budget; skips a job whose unique key
-- a live job, or a newer job of the same batch, holds. Returns the jobs requeued.
WITH input AS (
    SELECT * FROM unnest(%(ids)s::bigint[], %(budgets)s::int[]) AS input (id, budget)
), candidate AS MATERIALIZED (
    SELECT jobs.id, jobs.tenant_id, jobs.unique_key, input.budget
    FROM jobs
    JOIN input ON input.id = jobs.id
    WHERE jobs.state IN ('dead', 'cancelled')
    ORDER BY jobs.id
    FOR UPDATE OF jobs
), chosen AS (
    SELECT DISTINCT ON (candidate.tenant_id, candidate.unique_key,
                        CASE WHEN candidate.unique_key IS NULL THEN candidate.id END)
           candidate.id, candidate.budget
    FROM candidate
    WHERE NOT EXISTS (
        SELECT 1 FROM jobs AS live
        WHERE live.tenant_id = candidate.tenant_id AND live.unique_key = candidate.unique_key
          AND live.state IN ('available', 'running')
    )
    ORDER BY candidate.tenant_id, candidate.unique_key,
             CASE WHEN candidate.unique_key IS NULL THEN candidate.id END, candidate.id DESC
), requeued AS (
    UPDATE jobs
    SET state = 'available',
        available_at = now(),
        finished_at = NULL,
        cancel_requested_at = NULL,
        max_attempts = jobs.attempt + chosen.budget
    FROM chosen
    WHERE jobs.id = chosen.id
    RETURNING jobs.id, jobs.tenant_id, jobs.queue
)
SELECT id, tenant_id, queue, pg_notify('pauta_jobs', queue) FROM requeued

-- name: job_discard
-- Discard dead jobs: they become cancelled (finished now), leave the failures list and are
-- pruned with cancelled jobs; row, error and attempts stay until then, and requeue still works.
-- Rows are locked in id order, as every multi-row write of jobs does.
WITH locked AS MATERIALIZED (
    SELECT id FROM jobs WHERE id = ANY (%(ids)s::bigint[]) AND state = 'dead'
    ORDER BY id
    FOR UPDATE
)
UPDATE jobs
SET state = 'cancelled', finished_at = now()
FROM locked
WHERE jobs.id = locked.id AND jobs.state = 'dead'
RETURNING jobs.id, jobs.tenant_id, jobs.queue
