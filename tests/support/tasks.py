"""Tasks the process tests run inside worker.py."""

import time

from jobqueue import JobContext, PermanentError, RetryPolicy, task

FAST_RETRY = RetryPolicy(base_seconds=0.2, factor=2.0, cap_seconds=0.5, rng=lambda: 1.0)


@task("ledger_write", pass_context=True)
def ledger_write(ctx: JobContext) -> None:
    """Record that this job ran; the ledger's primary key makes a second run fail loudly."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO ledger (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )


@task("flaky", pass_context=True, retry=FAST_RETRY)
def flaky(ctx: JobContext, failures: int) -> None:
    """Fail the first ``failures`` attempts, then succeed."""
    if ctx.attempt <= failures:
        raise ConnectionError(f"attempt {ctx.attempt} failed on purpose")


@task("always_fails", retry=FAST_RETRY)
def always_fails() -> None:
    raise ValueError("broken for good")


@task("jittered_fails", retry=RetryPolicy(base_seconds=0.2, factor=2.0, cap_seconds=0.5))
def jittered_fails() -> None:
    raise ValueError("broken, with jitter")


@task("refuses")
def refuses() -> None:
    raise PermanentError("this job can never succeed")


@task("nap", pass_context=True)
def nap(ctx: JobContext, seconds: float) -> None:
    """Sleep, and note the start in the ledger so tests can wait for a job to be running."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO started (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
    time.sleep(seconds)


@task("record_run", pass_context=True, retry=FAST_RETRY)
def record_run(ctx: JobContext, pause: float = 0.0) -> None:
    """Append this run to `runs` (duplicates allowed, so tests can count them)."""
    if pause:
        time.sleep(pause)
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO runs (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
