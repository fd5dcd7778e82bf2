"""Running one claimed job: look up its task, check its payload, call it, classify the result.

Nothing here touches the database; the runner writes the :class:`AttemptResult` it returns.
"""

import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

import psycopg

from jobqueue import telemetry
from jobqueue.errors import PermanentError, UnknownTask
from jobqueue.registry import TaskRegistry
from jobqueue.store import AttemptResult, ClaimedJob

ConnectionFactory = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a task registered with ``pass_context=True`` learns about the job it runs."""

    job: ClaimedJob
    worker: str
    connection: ConnectionFactory  # ``with ctx.connection() as conn:`` borrows a pooled one

    @property
    def job_id(self) -> int:
        return self.job.id

    @property
    def attempt(self) -> int:
        return self.job.attempt

    @property
    def tenant_id(self) -> int:
        return self.job.tenant_id


def run_job(
    job: ClaimedJob, tasks: TaskRegistry, worker: str, connection: ConnectionFactory
) -> AttemptResult:
    """Run one attempt and say how it ended. Never raises for anything the task does."""
    with telemetry.consumer(job, job.trace_context) as span:
        result = _run(job, tasks, worker, connection, span)
    if span is None:
        return result
    return replace(result, trace_id=telemetry.trace_id_of(span))


def _run(
    job: ClaimedJob, tasks: TaskRegistry, worker: str, connection: ConnectionFactory, span: Any
) -> AttemptResult:
    started = time.perf_counter()
    task = tasks.get(job.task)
    if task is None:
        message = f"no task named {job.task!r} is registered in this worker"
        telemetry.record_failure(span, UnknownTask(message), "dead")
        return _result(job, "dead", f"UnknownTask: {message}")
    try:
        arguments = task.call_arguments(job.payload)
        if task.pass_context:
            task.function(JobContext(job, worker, connection), **arguments)
        else:
            task.function(**arguments)
    except PermanentError as error:
        telemetry.record_failure(span, error, "dead")
        return _result(job, "dead", _describe(error), traceback.format_exc(), started=started)
    except BaseException as error:  # a task's failure, whatever it is, never kills the runner
        telemetry.record_failure(span, error, "failed")
        delay = task.retry.delay(job.attempt)
        return _result(job, "failed", _describe(error), traceback.format_exc(), delay, started)
    return _result(job, "succeeded", started=started)


def _result(
    job: ClaimedJob,
    outcome: str,
    error: str | None = None,
    trace: str | None = None,
    retry_delay: float = 0.0,
    started: float | None = None,
) -> AttemptResult:
    duration = 0.0 if started is None else time.perf_counter() - started
    return AttemptResult(job, outcome, error, trace, retry_delay, duration)


def _describe(error: BaseException) -> str:
    message = str(error)
    name = type(error).__name__
    return f"{name}: {message}" if message else name
