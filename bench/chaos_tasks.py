"""The chaos run's task: work a little, then record the run in a ledger in its own commit."""

import time

from jobqueue import JobContext, RetryPolicy, task

# Faults make attempts fail (a connection cut mid-task); plenty of quick retries keep every
# job alive through a run of them, so a dead job would mean a real loss.
CHAOS_RETRY = RetryPolicy(max_attempts=100, base_seconds=0.05, cap_seconds=1.0)


@task("chaos_record", pass_context=True, retry=CHAOS_RETRY)
def chaos_record(ctx: JobContext, pause: float = 0.0) -> None:
    if pause:
        time.sleep(pause)
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO chaos_ledger (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
