"""Tasks every worker knows: for operations, smoke tests and benchmarks."""

import time

from jobqueue.registry import task


@task("noop")
def noop() -> None:
    """Do nothing; measures the engine's own overhead."""


@task("sleep")
def sleep(seconds: float) -> None:
    """Sleep for ``seconds``; stands in for a slow job."""
    time.sleep(float(seconds))


class FailTaskError(RuntimeError):
    pass


@task("fail")
def fail(message: str = "this task always fails") -> None:
    """Always raise; fills the retry path and the dead-letter state on purpose."""
    raise FailTaskError(message)
