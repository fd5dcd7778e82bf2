"""Running one claimed job: look up its task, check its payload, call it, classify the result.

Nothing here touches the database; the runner writes the :class:`AttemptResult` it returns.
"""

import math
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import psycopg

from jobqueue import telemetry
from jobqueue.errors import PermanentError, TimedOut, UnknownTask
from jobqueue.registry import TaskRegistry
from jobqueue.store import AttemptResult, ClaimedJob
from jobqueue.text import TextLimits, cut_end, cut_middle

ConnectionFactory = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]


class Flag:
    """A flag one thread sets and others read, never waited on: what a threading.Event offers
    for that, without the condition and lock it builds (two per attempt were a tenth of a no-op
    attempt's time)."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class AttemptControl(NamedTuple):
    """What the runner and a running task share about one attempt: when it started and must
    end (the runner's watchdog reads ``expires``), and whether it was asked to stop.

    A named tuple, made at every attempt: as a frozen dataclass, with its wall-clock deadline
    computed at the start, it cost 1.41 µs an attempt, now 0.53 (docs/benchmarks.md,
    "2026-12-05, morning")."""

    timeout: float  # seconds
    started: float  # time.monotonic() at the start
    started_at: float  # time.time() at the start
    cancel: Flag  # set by the heartbeat
    cancel_seen: Flag  # the task saw it

    @classmethod
    def start(cls, timeout: float) -> "AttemptControl":
        return cls(timeout, time.monotonic(), time.time(), Flag(), Flag())

    @property
    def expires(self) -> float:
        return self.started + self.timeout

    @property
    def deadline(self) -> datetime:
        """The same end by the wall clock (UTC), for tasks and logs."""
        if self.timeout == math.inf:
            return NEVER
        return datetime.fromtimestamp(self.started_at + self.timeout, UTC)


NEVER = datetime.max.replace(tzinfo=UTC)


def no_control() -> AttemptControl:
    """For a context built outside a worker: no timeout, never cancelled."""
    return AttemptControl(math.inf, 0.0, 0.0, Flag(), Flag())


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a task registered with ``pass_context=True`` learns about the job it runs."""

    job: ClaimedJob
    worker: str
    connection: ConnectionFactory  # ``with ctx.connection() as conn:`` borrows a pooled one
    control: AttemptControl = field(default_factory=no_control)

    @property
    def deadline(self) -> datetime:
        """When this attempt times out (UTC); past it the attempt is recorded ``timed_out``."""
        return self.control.deadline

    def remaining(self) -> float:
        """Seconds left before this attempt times out (0 once it has)."""
        return max(0.0, self.control.expires - time.monotonic())

    @property
    def cancel_requested(self) -> bool:
        """True once someone asked to cancel this job (the worker learns it at a heartbeat). A
        task that sees it should stop soon; the attempt is then recorded ``cancelled`` and the
        job is not retried, whatever the task returns or raises."""
        if not self.control.cancel.is_set():
            return False
        self.control.cancel_seen.set()
        return True

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
    control: AttemptControl | None = None,
) -> AttemptResult:
    """Run one attempt and say how it ended. Never raises for anything the task does; the error
    and traceback it reports are cleaned and cut to ``limits``, so they can always be stored.
    ``control`` is what the task's context reports of its deadline (the runner enforces it) and
    of a request to cancel it; a task that saw that request ends ``cancelled``, whether it then
    returned or raised."""
    control = control or no_control()
    with telemetry.ConsumerSpan(job, job.trace_context) as span:
        # the trace id is the span's from its start: known now, so the result is made once
        result = _run(job, tasks, worker, connection, span, limits, control)
    if control.cancel_seen.is_set():
        result = result._replace(
            outcome="cancelled",
            error=result.error or "Cancelled: the task stopped at a request to cancel the job",
        )
    return result


def _run(
    job: ClaimedJob,
    tasks: TaskRegistry,
    worker: str,
    connection: ConnectionFactory,
    span: Any,
    limits: TextLimits,
    control: AttemptControl,
) -> AttemptResult:
    started = time.perf_counter()
    trace_id = telemetry.trace_id_of(span)
    task = tasks.get(job.task)
    if task is None:
        error = UnknownTask(f"no task named {job.task!r} is registered in this worker")
        return _failure(job, "dead", error, None, 0.0, None, span, trace_id, limits)
    try:
        arguments = task.call_arguments(job.payload)
        if task.pass_context:
            task.function(JobContext(job, worker, connection, control), **arguments)
        else:
            task.function(**arguments)
    except PermanentError as error:
        return _failure(job, "dead", error, _traceback(), 0.0, started, span, trace_id, limits)
    except BaseException as error:  # a task's failure, whatever it is, never kills the runner
        delay = task.retry.delay(job.attempt)
        return _failure(job, "failed", error, _traceback(), delay, started, span, trace_id, limits)
    duration = time.perf_counter() - started
    return AttemptResult(job, "succeeded", None, None, 0.0, duration, trace_id)


def _failure(
    job: ClaimedJob,
    outcome: str,
    error: BaseException,
    trace: str | None,
    retry_delay: float,
    started: float | None,
    span: Any,
    trace_id: str | None,
    limits: TextLimits,
) -> AttemptResult:
    description = cut_end(_describe(error), limits.error_bytes)
    telemetry.record_failure(span, error, outcome, description)
    trace = None if trace is None else cut_middle(trace, limits.traceback_bytes)
    duration = 0.0 if started is None else time.perf_counter() - started
    return AttemptResult(job, outcome, description, trace, retry_delay, duration, trace_id)


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


def timed_out(
    job: ClaimedJob,
    control: AttemptControl,
    retry_delay: float,
    stack: str | None,
    limits: TextLimits = TextLimits(),  # noqa: B008 - frozen, so one shared default is safe
) -> AttemptResult:
    """The result of an attempt that ran past its timeout, with where its thread was stuck."""
    error = TimedOut(
        f"the attempt ran past its timeout of {control.timeout:g}s; its thread was abandoned"
    )
    description = cut_end(_describe(error), limits.error_bytes)
    trace = None if stack is None else cut_middle(stack, limits.traceback_bytes)
    duration = time.monotonic() - control.started
    return AttemptResult(job, "timed_out", description, trace, retry_delay, duration)
