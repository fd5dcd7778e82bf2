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
from jobqueue.text import TextLimits, cut_end, cut_middle

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
    job: ClaimedJob,
    tasks: TaskRegistry,
    worker: str,
    connection: ConnectionFactory,
    limits: TextLimits = TextLimits(),  # noqa: B008 - frozen, so one shared default is safe
) -> AttemptResult:
    """Run one attempt and say how it ended. Never raises for anything the task does; the error
    and traceback it reports are cleaned and cut to ``limits``, so they can always be stored."""
    with telemetry.consumer(job, job.trace_context) as span:
        result = _run(job, tasks, worker, connection, span, limits)
    if span is None:
        return result
    return replace(result, trace_id=telemetry.trace_id_of(span))


def _run(
    job: ClaimedJob,
    tasks: TaskRegistry,
    worker: str,
    connection: ConnectionFactory,
    span: Any,
    limits: TextLimits,
) -> AttemptResult:
    started = time.perf_counter()
    task = tasks.get(job.task)
    if task is None:
        error = UnknownTask(f"no task named {job.task!r} is registered in this worker")
        return _failure(job, "dead", error, None, 0.0, None, span, limits)
    try:
        arguments = task.call_arguments(job.payload)
        if task.pass_context:
            task.function(JobContext(job, worker, connection), **arguments)
        else:
            task.function(**arguments)
    except PermanentError as error:
        return _failure(job, "dead", error, _traceback(), 0.0, started, span, limits)
    except BaseException as error:  # a task's failure, whatever it is, never kills the runner
        delay = task.retry.delay(job.attempt)
        return _failure(job, "failed", error, _traceback(), delay, started, span, limits)
    return AttemptResult(job, "succeeded", None, None, 0.0, time.perf_counter() - started)


def _failure(
    job: ClaimedJob,
    outcome: str,
    error: BaseException,
    trace: str | None,
    retry_delay: float,
    started: float | None,
    span: Any,
    limits: TextLimits,
) -> AttemptResult:
    description = cut_end(_describe(error), limits.error_bytes)
    telemetry.record_failure(span, error, outcome, description)
    trace = None if trace is None else cut_middle(trace, limits.traceback_bytes)
    duration = 0.0 if started is None else time.perf_counter() - started
    return AttemptResult(job, outcome, description, trace, retry_delay, duration)


def _describe(error: BaseException) -> str:
    name = type(error).__name__
    try:
        message = str(error)
    except Exception:  # an exception whose __str__ itself fails
        message = "<the exception's message could not be read>"
    return f"{name}: {message}" if message else name


def _traceback() -> str:
    try:
        return traceback.format_exc()
    except Exception:
        return "<the traceback could not be formatted>"
