"""The soak's tasks (bench.soak): a no-op, one that fails its first attempt and succeeds on the
second, and one that always fails once and is dead. Each retry waits about a second, so a
retried job comes back within the run."""

from jobqueue import task
from jobqueue.backoff import RetryPolicy
from jobqueue.execution import JobContext

NOOP = "soak_noop"
RETRIED = "soak_retried"
DEAD = "soak_dead"


@task(NOOP)
def soak_noop(seq: int) -> None:
    del seq


@task(RETRIED, pass_context=True, retry=RetryPolicy(max_attempts=2, base_seconds=1.0))
def soak_retried(ctx: JobContext, seq: int) -> None:
    if ctx.job.attempt == 1:
        raise RuntimeError(f"soak job {seq}: first attempt fails on purpose")


@task(DEAD, retry=RetryPolicy(max_attempts=1))
def soak_dead(seq: int) -> None:
    raise RuntimeError(f"soak job {seq}: fails on purpose, no retry")
