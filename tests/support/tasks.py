"""Tasks the process tests run inside worker.py."""

import gc
import socket
import time

from opentelemetry import trace

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


@task("reports_gc_threshold")
def reports_gc_threshold() -> None:
    """Ends dead with the first garbage-collector threshold of the process that ran it as its
    error, so that a test reads what a worker process runs with from the job's row."""
    raise PermanentError(f"gc threshold {gc.get_threshold()[0]}")


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


@task("nap_then_record", pass_context=True, retry=FAST_RETRY)
def nap_then_record(ctx: JobContext, seconds: float, later: float | None = None) -> None:
    """Note the start in `started`, sleep (``later`` seconds on attempts after the first, if
    given), then append the run to `runs`: a test can see which process holds a job while it
    runs, and count the runs that finished."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO started (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
    time.sleep(seconds if later is None or ctx.attempt == 1 else later)
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO runs (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )


HOSTILE_RETRY = RetryPolicy(max_attempts=2, base_seconds=0.1, cap_seconds=0.1, rng=lambda: 1.0)


@task("raises_nul", retry=HOSTILE_RETRY)
def raises_nul() -> None:
    raise ValueError("before\x00after")


@task("raises_surrogate", retry=HOSTILE_RETRY)
def raises_surrogate() -> None:
    raise ValueError("lone \ud800 surrogate")


@task("raises_huge_message", retry=HOSTILE_RETRY)
def raises_huge_message() -> None:
    raise ValueError("m" * 5_000_000)


@task("raises_huge_traceback", retry=HOSTILE_RETRY)
def raises_huge_traceback() -> None:
    """A small message whose traceback carries a 2 MB cause."""
    try:
        raise LookupError("t" * 2_000_000)
    except LookupError as cause:
        raise ValueError("small message, huge traceback") from cause


HANG_RETRY = RetryPolicy(max_attempts=3, base_seconds=0.2, factor=2.0, cap_seconds=0.5)


@task("hangs_on_socket", pass_context=True, timeout=2, retry=HANG_RETRY)
def hangs_on_socket(ctx: JobContext, port: int) -> None:
    """Note the start, then wait forever for a reply from a server that never answers."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO started (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
    with socket.create_connection(("127.0.0.1", port)) as peer:
        peer.recv(1)


@task("watches_its_deadline", pass_context=True)
def watches_its_deadline(ctx: JobContext) -> None:
    """Record what the context says of the deadline, in `runs` (worker column)."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO runs (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, f"{ctx.deadline.isoformat()} {ctx.remaining():.3f}"),
        )


@task("stops_when_asked", pass_context=True, timeout=30)
def stops_when_asked(ctx: JobContext) -> None:
    """Note the start, then work in small steps until asked to cancel (a cooperative task)."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO started (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
    while not ctx.cancel_requested:
        time.sleep(0.02)


@task("ignores_cancel", pass_context=True, timeout=2)
def ignores_cancel(ctx: JobContext) -> None:
    """Note the start, then sleep without ever looking at ``ctx.cancel_requested``."""
    with ctx.connection() as connection:
        connection.execute(
            "INSERT INTO started (job_id, attempt, worker) VALUES (%s, %s, %s)",
            (ctx.job_id, ctx.attempt, ctx.worker),
        )
    time.sleep(60)


@task("tags_its_span")
def tags_its_span(tag: str) -> None:
    """Set an attribute on the attempt's span, as a task may on its current span."""
    trace.get_current_span().set_attribute("test.tag", tag)
