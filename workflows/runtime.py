"""Running a slice of an execution: the ``workflow.run`` task on the ``workflows`` queue.

A slice replays the execution's recorded steps (returning their stored outputs without running
them), runs the steps that follow, checkpointing each, and ends when the workflow returns,
fails, or parks on a wait. Because a slice is an ordinary job, the engine's claim, lease,
heartbeat, fencing and rescue apply to it unchanged: a slice whose worker dies is claimed again
and replays from its last checkpoint.
"""

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from opentelemetry import trace
from psycopg import errors as pg_errors

from jobqueue import JobContext, PermanentError, RetryPolicy, enqueue, task, telemetry
from jobqueue.cooperative import gather, idle, in_group
from jobqueue.text import cut_end
from workflows.errors import CodeChanged, StepFailed
from workflows.registry import Workflow, WorkflowRegistry, registry
from workflows.store import (
    JSON_ENCODER,
    Boundary,
    Checkpoint,
    End,
    Fence,
    Guarded,
    Recorded,
    WorkflowStore,
    guard_boundaries,
    load_slices,
    slice_key,
)

log = logging.getLogger("workflows")

QUEUE = "workflows"
SLICE_TASK = "workflow.run"
# A slice's job is retried whenever its worker dies or the database goes away; each retry replays.
SLICE_RETRY = RetryPolicy(max_attempts=10_000, base_seconds=0.5, factor=2.0, cap_seconds=30.0)
# An external step's default: three attempts, 0.5 s then 1 s apart (at most; full jitter).
STEP_RETRY = RetryPolicy(max_attempts=3, base_seconds=0.5, factor=2.0, cap_seconds=30.0)
# A transaction step that loses a serialization or deadlock race is simply run again.
RACE_RETRIES = 20
# Slices a worker thread runs together at most (jobqueue.cooperative: fewer when they take long):
# a group's loads, and its boundaries at each point, are one statement and one commit each, and
# a group costs about 1.2 ms of the worker's CPU whatever its size. At 2 threads, 28 made 4-10%
# more workflows a second than 24 with the step p99 at 6.6-8.0 ms; 32 as many as 28, with the
# p99 up to 9.6 ms (a stalled group is most of the slowest 1%; docs/benchmarks.md, 2026-12-03).
SLICE_BATCH = 28
FINISHED = frozenset({"succeeded", "failed", "cancelled"})
MAX_ERROR_BYTES = 4000


def enqueue_slice(
    connection: psycopg.Connection[Any],
    execution_id: int,
    tenant_id: int,
    run_at: datetime | None = None,
) -> int:
    return enqueue(
        connection,
        SLICE_TASK,
        {"execution_id": execution_id},
        queue=QUEUE,
        run_at=run_at,
        tenant_id=tenant_id,
        unique_key=slice_key(execution_id),
        max_attempts=SLICE_RETRY.max_attempts,
    )


@dataclass(frozen=True, slots=True)
class Event:
    """What ``ctx.wait_for`` returns when the event came: its payload and who sent it."""

    payload: Any
    decided_by: str | None


class _Stop(Exception):
    """Leave the slice: the execution is parked, cancelled, or no longer this slice's."""


class _AlreadyRecorded(Exception):
    """A transaction step found its checkpoint written before: roll back its own effects."""


class HeldCheckpointTaken(RuntimeError):
    """A checkpoint the slice held back found its step recorded by another writer: the workflow
    code has gone on with a result that is not the stored one, so the slice's job fails (nothing
    of it committed) and is retried, and the replay returns the stored result."""


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span (when telemetry is on) around a slice or a step, a child of the current one: the
    slice's is a child of the job attempt's ``process workflow.run``, itself linked to the
    enqueue, and so to the request that started the execution."""
    if not telemetry.active():
        return NO_SPAN
    return trace.get_tracer("pauta.workflows").start_as_current_span(name, attributes=attributes)


NO_SPAN = nullcontext()


def describe(error: BaseException) -> str:
    name = type(error).__name__
    message = str(error)
    return cut_end(f"{name}: {message}" if message else name, MAX_ERROR_BYTES)


def as_json(value: Any) -> Any:
    """``value`` as a replay will see it (tuples become lists, and so on); refuses non-JSON, and
    text holding a NUL character, which PostgreSQL's jsonb cannot store (the checkpoint's write
    would fail at every retry of the slice)."""
    kind = type(value)
    if value is None or kind is int or kind is bool or (kind is str and "\x00" not in value):
        return value  # what a JSON round trip gives back unchanged
    encoded = JSON_ENCODER.encode(value)
    if "\\u0000" in encoded and ESCAPED_NUL.search(encoded):
        raise ValueError("the value holds a NUL character (\\x00), which PostgreSQL cannot store")
    return json.loads(encoded)


# A NUL as JSON writes it, \u0000, not preceded by an escaped backslash (text holding a
# backslash then "u0000" is written \\u0000, and is fine).
ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


class WorkflowContext:
    """What workflow code calls: ``step``, ``sleep``, ``sleep_until`` and ``wait_for``.

    Every call takes the next step position; a replay must make the same calls in the same
    order, or the execution fails with "workflow code changed at step N".
    """

    def __init__(
        self,
        store: WorkflowStore,
        execution: dict[str, Any],
        fence: Fence,
        recorded: list[Recorded],
        waits: dict[int, tuple[str, str | None]],
    ) -> None:
        self._store = store
        self._fence = fence
        self._recorded = {step.step_id: step for step in recorded}
        self._waits = waits  # waits written but not over: {step id: (kind, key)}
        self._next = 0
        # The last external step's checkpoint, not yet written: it goes with the next boundary
        # (a transaction step's, a wait's, the end's), or alone before the next external step.
        self._held: Checkpoint | None = None
        self.execution_id: int = execution["id"]
        self.tenant_id: int = execution["tenant_id"]
        self.name: str = execution["name"]
        self.idempotency_key: str | None = None  # "<execution>:<step>" while a step runs

    @property
    def connection(self) -> psycopg.Connection[Any]:
        """The slice's connection, in autocommit mode between checkpoints: an external step may
        use it (each statement commits on its own); a transactional step gets it inside the
        checkpoint's transaction instead."""
        return self._store.connection

    # -- steps ---------------------------------------------------------------------------------

    def step(
        self,
        function: Callable[..., Any],
        *args: Any,
        name: str | None = None,
        transactional: bool = False,
        retry: RetryPolicy | None = None,
    ) -> Any:
        """Run ``function(*args)`` once for this execution and return its (JSON) result.

        A transactional step is called as ``function(connection, *args)`` inside the transaction
        that also writes its checkpoint: its database effect and its checkpoint commit together,
        exactly once. Other steps are at-least-once (a worker may die between the effect and the
        checkpoint): they are retried by ``retry`` and can pass ``ctx.idempotency_key`` on.
        """
        step_id = self._take()
        step_name = name or function.__qualname__
        kind = "transaction" if transactional else "step"
        recorded = self._replayed(step_id, step_name, kind)
        if recorded is not None:
            return self._result(recorded)
        policy = retry or STEP_RETRY
        with span(f"step {step_name}", **{"pauta.workflow.step_id": step_id,
                                          "pauta.workflow.step_kind": kind}):  # fmt: skip
            if transactional:
                return self._transaction(step_id, step_name, function, args, policy)
            return self._external(step_id, step_name, function, args, policy)

    def sleep(self, seconds: float) -> None:
        """Park the execution for ``seconds`` (database time), holding no thread or connection."""
        if not 0 <= seconds <= 10 * 365 * 24 * 3600:
            raise ValueError(f"sleep takes 0 to ten years in seconds, not {seconds}")
        self._wait_step("sleep", None, float(seconds), None)

    def sleep_until(self, moment: datetime) -> None:
        """Park the execution until ``moment`` (an aware datetime)."""
        if moment.utcoffset() is None:
            raise ValueError("sleep_until needs a timezone-aware datetime")
        self._wait_step("sleep", None, None, moment)

    def wait_for(self, key: str, timeout: float | None = None) -> Event | None:
        """Park the execution until ``send_event(execution, key, ...)``; the event, or None when
        ``timeout`` seconds passed first (a later event for this wait is refused)."""
        if not key or not isinstance(key, str):
            raise ValueError("wait_for needs a non-empty key")
        if timeout is not None and not 0 <= timeout <= 10 * 365 * 24 * 3600:
            raise ValueError(f"timeout takes 0 to ten years in seconds, not {timeout}")
        output = self._wait_step("event", key, timeout, None)
        if output is None or output.get("timed_out"):
            return None
        return Event(output.get("payload"), output.get("decided_by"))

    # -- replay --------------------------------------------------------------------------------

    def _take(self) -> int:
        step_id = self._next
        self._next += 1
        return step_id

    def _replayed(self, step_id: int, name: str, kind: str) -> Recorded | None:
        recorded = self._recorded.get(step_id)
        waiting = self._waits.get(step_id)
        if waiting is not None and _wait_name(*waiting) != _wait_name(
            "sleep" if kind == "sleep" else "event" if kind == "wait" else kind, name
        ):
            raise CodeChanged(
                f"workflow code changed at step {step_id}: the execution waits there for "
                f"{_wait_name(*waiting)}, the code now calls {kind} {name!r}"
            )
        if recorded is not None and (recorded.name, recorded.kind) != (name, kind):
            raise CodeChanged(
                f"workflow code changed at step {step_id}: the execution recorded "
                f"{recorded.kind} {recorded.name!r} there, the code now calls {kind} {name!r}"
            )
        return recorded

    def check_finished(self) -> None:
        """At the workflow's return: no recorded step may lie past the last one it called."""
        later = [step for step_id, step in self._recorded.items() if step_id >= self._next]
        if later:
            first = min(later, key=lambda step: step.step_id)
            raise CodeChanged(
                f"workflow code changed at step {first.step_id}: the execution recorded "
                f"{first.kind} {first.name!r} there, the code now returns before it"
            )

    @staticmethod
    def _result(recorded: Recorded) -> Any:
        if recorded.error is not None:
            raise StepFailed(recorded.step_id, recorded.name, recorded.error)
        return recorded.output

    # -- running steps -------------------------------------------------------------------------

    def _guard(self) -> None:
        """Inside a transaction: the step boundary (lock the execution then the job, write the
        held-back checkpoint); leave unless the execution is still ours and running. The held
        checkpoint counts as written once that transaction commits (see :meth:`_boundary`)."""
        self._check(self._store.guard(self.execution_id, self._fence, self._held))

    def _check(self, guarded: Guarded) -> None:
        if not guarded.fenced:
            log.warning("execution %d: the slice's lease was lost; stopping", self.execution_id)
            raise _Stop
        if guarded.status != "running":
            log.info("execution %d is %s; its slice stops", self.execution_id, guarded.status)
            raise _Stop
        if not guarded.recorded:
            held = self._held
            raise HeldCheckpointTaken(
                f"execution {self.execution_id}: step {held.step_id if held else '?'} was "
                "recorded by another writer; the slice is retried and replays it"
            )

    @contextmanager
    def _boundary(self) -> Iterator[psycopg.Connection[Any]]:
        """A transaction that starts at a step boundary; the held checkpoint goes with it and
        is forgotten only once it committed (a rollback keeps it held for the next one)."""
        connection = self._store.connection
        with connection.transaction():
            self._guard()
            yield connection
        self._held = None

    def flush(self) -> None:
        """Write the held checkpoint now, alone (one statement, its own transaction; in a group
        of slices, one statement for all of the group's that flush at this point)."""
        if self._held is not None:
            self._check(self._guard_alone())
            self._held = None

    def _guard_alone(self, end: End | None = None) -> Guarded:
        """The boundary as a statement of its own: gathered with the group's (one statement for
        all), unless a transaction is open on the connection (workflow code calling a step
        inside a transactional step), which the group's statement must not run in."""
        if not idle(self._store.connection):
            return self._store.guard(self.execution_id, self._fence, self._held, end)
        boundary = Boundary(self._store, self.execution_id, self._fence, self._held, end)
        answer = gather(guard_boundaries, boundary)
        if isinstance(answer, Exception):  # gather raised it already; this tells the type
            raise answer
        return answer

    def end(self, status: str, output: Any, error: str | None) -> bool:
        """End the execution with the held checkpoint, in one statement; False when the slice
        no longer holds it (lost lease, cancelled)."""
        guarded = self._guard_alone(End(status, output, error))
        try:
            self._check(guarded)
        except _Stop:
            return False
        self._held = None
        return True

    def _external(
        self,
        step_id: int,
        name: str,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        policy: RetryPolicy,
    ) -> Any:
        # One external step's checkpoint at most is ever held back: a kill repeats at most one
        # external step (the one running, or the last one while the code after it runs).
        self.flush()
        started = time.time()
        attempts = 0
        self.idempotency_key = f"{self.execution_id}:{step_id}"
        try:
            while True:
                attempts += 1
                try:
                    value, error = as_json(function(*args)), None
                    break
                except PermanentError as failure:
                    value, error = None, describe(failure)
                    break
                except Exception as failure:
                    if attempts >= policy.max_attempts:
                        value, error = None, describe(failure)
                        break
                    time.sleep(policy.delay(attempts))
        finally:
            self.idempotency_key = None
        self._held = Checkpoint(step_id, name, "step", value, error, attempts, started, time.time())
        if error is not None:
            raise StepFailed(step_id, name, error)
        return value

    def _checkpoint(
        self,
        step_id: int,
        name: str,
        kind: str,
        error: str,
        attempts: int,
        started: float,
    ) -> Any:
        """Record a transaction step's failure (its retries spent) and raise it."""
        checkpoint = Checkpoint(step_id, name, kind, None, error, attempts, started, None)
        with self._boundary():
            inserted = self._store.record(self.execution_id, checkpoint)
            stored = None if inserted else self._store.step(self.execution_id, step_id)
        if stored is not None:  # written before (a slice that died after its commit): keep it
            return self._result(stored)
        raise StepFailed(step_id, name, error)

    def _transaction(
        self,
        step_id: int,
        name: str,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        policy: RetryPolicy,
    ) -> Any:
        started = time.time()
        attempts = 0
        races = 0
        while True:
            attempts += 1
            try:
                with self._boundary() as connection:
                    value = as_json(function(connection, *args))
                    checkpoint = Checkpoint(
                        step_id, name, "transaction", value, None, attempts, started,
                        time.time(),
                    )  # fmt: skip
                    if not self._store.record(self.execution_id, checkpoint):
                        raise _AlreadyRecorded
                return value
            except _AlreadyRecorded:
                return self._result(self._store.step(self.execution_id, step_id))
            except (pg_errors.SerializationFailure, pg_errors.DeadlockDetected):
                races += 1
                attempts -= 1
                if races > RACE_RETRIES:
                    raise
            except (_Stop, HeldCheckpointTaken):
                raise
            except psycopg.OperationalError:
                raise  # the connection, not the step: the slice's job is retried
            except PermanentError as failure:
                return self._checkpoint(
                    step_id, name, "transaction", describe(failure), attempts, started
                )
            except Exception as failure:
                if attempts >= policy.max_attempts:
                    return self._checkpoint(
                        step_id, name, "transaction", describe(failure), attempts, started
                    )
                time.sleep(policy.delay(attempts))

    # -- waits ---------------------------------------------------------------------------------

    def _wait_step(
        self, kind: str, key: str | None, seconds: float | None, until: datetime | None
    ) -> dict[str, Any] | None:
        step_id = self._take()
        name = key if key is not None else "sleep"
        step_kind = "wait" if kind == "event" else "sleep"
        recorded = self._replayed(step_id, name, step_kind)
        if recorded is not None:
            output: dict[str, Any] | None = recorded.output
            return output
        park_until: datetime | None = None
        with self._boundary():
            wait = self._store.wait(self.execution_id, step_id)
            if wait is None:
                wake_at = self._store.insert_wait(
                    self.execution_id, step_id, kind, key, seconds, until
                )
                park_until = self._park(wake_at)
            else:
                if (wait["kind"], wait["key"]) != (kind, key):
                    raise CodeChanged(
                        f"workflow code changed at step {step_id}: the execution waits there "
                        f"for {_wait_name(wait['kind'], wait['key'])}, the code now asks for "
                        f"{_wait_name(kind, key)}"
                    )
                output = self._wait_outcome(step_id, wait)
                if output is None:  # not due yet (the slice ran early): park again
                    park_until = self._park(wait["wake_at"])
                else:
                    started = wait["wake_at"].timestamp() if kind == "sleep" else None
                    checkpoint = Checkpoint(
                        step_id, name, step_kind, output, None, 1, started, None
                    )
                    self._store.record(self.execution_id, checkpoint)
                    return output
        log.debug("execution %d parked at step %d until %s", self.execution_id, step_id, park_until)
        raise _Stop

    def _wait_outcome(self, step_id: int, wait: dict[str, Any]) -> dict[str, Any] | None:
        """The output of a wait that is over (closing it if its time came), None if it is not."""
        if wait["outcome"] == "event":
            return {"payload": wait["payload"], "decided_by": wait["decided_by"]}
        if wait["outcome"] is None and not wait["due"]:
            return None
        if wait["outcome"] is None:
            outcome = "woke" if wait["kind"] == "sleep" else "timeout"
            self._store.close_wait(self.execution_id, step_id, outcome)
        if wait["kind"] == "sleep":
            return {"woke_at": wait["wake_at"].isoformat()}
        return {"timed_out": True}

    def _park(self, wake_at: datetime | None) -> datetime | None:
        """Inside the wait's transaction: set the execution waiting, finish this slice's job and
        enqueue the next slice at ``wake_at`` (an event wait without timeout gets its job when
        the event comes)."""
        tenant_id = self._store.suspend(self.execution_id, self._fence)
        if tenant_id is None:
            raise _Stop  # the lease was lost under us: roll back, the new owner replays
        if wake_at is not None:
            enqueue_slice(self._store.connection, self.execution_id, tenant_id, run_at=wake_at)
        return wake_at


def _wait_name(kind: str, key: str | None) -> str:
    if kind == "sleep":
        return "a sleep"
    return f"the event {key!r}" if kind == "event" else f"{kind} {key!r}"


class Slice:
    """One job's worth of an execution: replay, run on, and end or park."""

    def __init__(
        self,
        store: WorkflowStore,
        execution_id: int,
        fence: Fence,
        workflows: WorkflowRegistry = registry,
    ) -> None:
        self.store = store
        self.execution_id = execution_id
        self.fence = fence
        self.workflows = workflows

    def run(self) -> None:
        loaded = gather(load_slices, (self.store, self.execution_id))
        if loaded is None or loaded.execution["status"] in FINISHED:
            return
        execution = loaded.execution
        definition = self.workflows.require(execution["name"])  # unknown: retried later
        # The execution is marked running by its first boundary (a checkpoint, a wait or its
        # end), in that boundary's statement: no commit of its own.
        context = WorkflowContext(
            self.store, execution, self.fence, loaded.steps, loaded.open_waits
        )
        # In a group of slices its boundaries commit together, one commit for the group: relaxed
        # durability would save little there, and it is a setting of the shared connection.
        relaxed = definition.relaxed_durability and not in_group()
        with self.store.relaxed_durability(relaxed):
            self._run(definition, context, execution["input"])

    def _run(self, definition: Workflow, context: WorkflowContext, input: dict[str, Any]) -> None:
        attributes = {"pauta.workflow.execution_id": self.execution_id,
                      "pauta.workflow.name": definition.name}  # fmt: skip
        try:
            with span(f"workflow {definition.name}", **attributes):
                output = definition.function(context, **input)
                context.check_finished()
                output = as_json(output)
        except _Stop:
            return
        except (psycopg.OperationalError, HeldCheckpointTaken):
            raise  # the job is retried and the replay resumes from what was committed
        except Exception as error:  # the workflow failed: a step's error, a bug, code changed
            self._end(context, "failed", None, describe(error))
            return
        self._end(context, "succeeded", output, None)

    def _end(self, context: WorkflowContext, status: str, output: Any, error: str | None) -> None:
        ended = context.end(status, output, error)
        # As for jobs, a success is a debug line (one per execution would flood a busy log).
        level = logging.DEBUG if ended and status == "succeeded" else logging.INFO
        log.log(level, "execution %d %s", self.execution_id, status if ended else "stopped")


@task(SLICE_TASK, queue=QUEUE, pass_context=True, retry=SLICE_RETRY, batch=SLICE_BATCH)
def run_slice(job: JobContext, execution_id: int) -> None:
    """The task that runs one slice of an execution (in a group of slices, the group's
    connection is shared and already in autocommit mode)."""
    with job.connection() as connection:
        if not idle(connection):
            connection.rollback()
        lent = not connection.autocommit
        if lent:
            connection.autocommit = True  # every checkpoint is a transaction of its own
        try:
            Slice(
                WorkflowStore(connection), execution_id, Fence(job.job_id, job.attempt, job.worker)
            ).run()
        finally:
            if lent and not connection.closed:
                connection.autocommit = False
