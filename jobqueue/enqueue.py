"""Enqueue jobs inside the caller's transaction.

``connection`` is whatever the caller is already writing with: a psycopg connection, a
SQLAlchemy ``Session`` (Flask-SQLAlchemy's ``db.session`` included) or a SQLAlchemy
``Connection``. The job row is written in that transaction, so it exists if and only if the
caller commits; workers are woken by a NOTIFY that PostgreSQL delivers at commit.
"""

import json
import re
from collections.abc import Iterable, Mapping
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, NamedTuple

import psycopg

from jobqueue import telemetry
from jobqueue.backoff import DEFAULT_MAX_ATTEMPTS, MAX_ATTEMPTS, MAX_DELAY_SECONDS
from jobqueue.errors import EnqueueError, PayloadTooLarge
from jobqueue.registry import DEFAULT_QUEUE, MAX_TIMEOUT_SECONDS, TaskRegistry, registry
from jobqueue.store import JobStore, NewJob
from jobqueue.text import unstorable

DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
QUEUE_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
SMALLINT = range(-32768, 32768)
BIGINT_MAX = 2**63 - 1
EARLIEST_RUN_AT = datetime(1970, 1, 1, tzinfo=UTC)
MAX_NAME_CHARS = 200  # task names
MAX_UNIQUE_KEY_BYTES = 1000  # UTF-8; the unique index refuses entries past about 2.7 kB
# A JSON "\u0000" escape that is not itself an escaped backslash: jsonb refuses it.
_JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
_JSON = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


class JobRequest(NamedTuple):
    """One job for :func:`enqueue_many`; the fields mean what :func:`enqueue`'s options mean.

    A named tuple, immutable as a frozen dataclass is and four times cheaper to make: a frozen
    dataclass sets each of its ten fields through ``object.__setattr__``, about 2 µs a request,
    more than :func:`enqueue_many` spends on it (docs/benchmarks.md, "2026-12-04, morning")."""

    task: str
    payload: Mapping[str, Any] | None = None
    queue: str | None = None
    delay: float | None = None
    run_at: datetime | None = None
    priority: int = 0
    max_attempts: int | None = None
    unique_key: str | None = None
    tenant_id: int | None = None
    timeout: float | None = None


def enqueue(
    connection: Any,
    task: str,
    payload: Mapping[str, Any] | None = None,
    *,
    queue: str | None = None,
    delay: float | None = None,
    run_at: datetime | None = None,
    priority: int = 0,
    max_attempts: int | None = None,
    unique_key: str | None = None,
    tenant_id: int | None = None,
    timeout: float | None = None,
    tasks: TaskRegistry = registry,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> int:
    """Enqueue one job in the caller's transaction and return its id.

    - ``queue``: defaults to the queue the task was registered with, else ``default``.
    - ``delay`` (seconds from now, database time) or ``run_at`` (an aware datetime): when the job
      becomes visible; neither means now.
    - ``priority``: lower runs first; ``max_attempts``: defaults to the task's retry policy.
    - ``unique_key``: while a job with the same key and tenant is waiting or running, enqueueing
      another returns that job's id instead of inserting a second one.
    - ``tenant_id``: the owning tenant; ``None`` means the ``system`` tenant.
    - ``timeout``: seconds each attempt may run; defaults to the task's ``timeout``, else the
      worker's ``timeout_seconds`` setting. An attempt that overruns it ends ``timed_out``.
    """
    request = JobRequest(
        task, payload, queue, delay, run_at, priority, max_attempts, unique_key, tenant_id, timeout
    )
    new_job = _prepare(request, tasks)
    payload_json = _payload_json(request.task, request.payload, max_payload_bytes)
    store = JobStore(psycopg_connection(connection))
    if not telemetry.active():  # no span to open: skip the context manager's generator
        return store.insert_job(new_job, payload_json)
    with telemetry.producer(new_job.queue, new_job.task, 1) as trace_context:
        new_job.trace_context = _json_or_none(trace_context)
        return store.insert_job(new_job, payload_json)


def enqueue_many(
    connection: Any,
    requests: Iterable[JobRequest],
    *,
    tasks: TaskRegistry = registry,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> list[int]:
    """Enqueue many jobs in one round trip, in the caller's transaction; ids in input order.

    Every request is checked before anything is written: one bad request refuses the batch.
    """
    requests = list(requests)
    if not requests:
        return []
    new_jobs = _prepare_all(requests, tasks)
    payloads = _payloads_json(requests, max_payload_bytes)
    store = JobStore(psycopg_connection(connection))
    if not telemetry.active():  # no span to name: skip gathering its queue and task
        return store.insert_jobs(new_jobs, payloads)
    queues = {job.queue for job in new_jobs}
    tasks_named = {job.task for job in new_jobs}
    with telemetry.producer(
        queues.pop() if len(queues) == 1 else "(several queues)",
        tasks_named.pop() if len(tasks_named) == 1 else "(several tasks)",
        len(new_jobs),
    ) as trace_context:
        new_jobs[0].trace_context = _json_or_none(trace_context)
        return store.insert_jobs(new_jobs, payloads)


def psycopg_connection(connection: Any) -> psycopg.Connection[Any]:
    """The psycopg connection under a psycopg connection or a SQLAlchemy Session/Connection.

    Pending ORM changes are flushed first, so the job is written after the rows the caller
    already changed in the same transaction.
    """
    if isinstance(connection, psycopg.Connection):
        return connection
    flush = getattr(connection, "flush", None)
    if callable(flush):  # a Session: flush its pending changes and take its Connection
        flush()
        connection = connection.connection()
    driver_connection = getattr(getattr(connection, "connection", None), "driver_connection", None)
    if not isinstance(driver_connection, psycopg.Connection):
        raise TypeError(
            "enqueue needs a psycopg connection or a SQLAlchemy Session/Connection using the "
            f"psycopg driver, not {type(connection).__name__}"
        )
    return driver_connection


def _prepare(request: JobRequest, tasks: TaskRegistry) -> NewJob:
    """Check one request against the engine's bounds (docs/reference/limits.md); a request that
    breaks one is refused with a sentence naming the argument, before anything is written."""
    task_name = request.task
    if not isinstance(task_name, str) or not task_name:
        raise EnqueueError("task must be a non-empty task name")
    _check_text("task", task_name, MAX_NAME_CHARS)
    registered = tasks.get(task_name)
    queue = request.queue or (registered.queue if registered else DEFAULT_QUEUE)
    if not isinstance(queue, str) or not _valid_queue_name(queue):
        raise EnqueueError(
            f"queue name {queue!r} is invalid: use 1-63 lowercase letters, digits, '_', '.' or '-'"
        )
    max_attempts = request.max_attempts
    if max_attempts is None:
        max_attempts = registered.retry.max_attempts if registered else DEFAULT_MAX_ATTEMPTS
    if not _whole(max_attempts) or not 1 <= max_attempts <= MAX_ATTEMPTS:
        raise EnqueueError(
            f"max_attempts must be between 1 and {MAX_ATTEMPTS:,}, not {max_attempts!r}"
        )
    if not _whole(request.priority) or request.priority not in SMALLINT:
        raise EnqueueError(
            f"priority must be a whole number between -32768 and 32767, not {request.priority!r}"
        )
    if request.tenant_id is not None and (
        not _whole(request.tenant_id) or not 1 <= request.tenant_id <= BIGINT_MAX
    ):
        raise EnqueueError(f"tenant_id must be a tenant's id, not {request.tenant_id!r}")
    if request.unique_key is not None:
        if not isinstance(request.unique_key, str):
            raise EnqueueError(f"unique_key must be text, not {type(request.unique_key).__name__}")
        _check_text("unique_key", request.unique_key, MAX_UNIQUE_KEY_BYTES, in_bytes=True)
    if request.delay is not None and request.run_at is not None:
        raise EnqueueError("give either delay or run_at, not both")
    delay = 0.0
    if request.delay is not None:
        if isinstance(request.delay, bool) or not isinstance(request.delay, int | float):
            raise EnqueueError(f"delay must be a number of seconds, not {request.delay!r}")
        if not 0 <= request.delay <= MAX_DELAY_SECONDS:  # also refuses nan and inf
            raise EnqueueError(
                f"delay must be between 0 and {MAX_DELAY_SECONDS:,} seconds (ten years), "
                f"not {request.delay}"
            )
        delay = float(request.delay)
    if request.run_at is not None:
        _check_run_at(request.run_at)
    timeout = request.timeout
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, int | float):
            raise EnqueueError(f"timeout must be a number of seconds, not {timeout!r}")
        if not 0 < timeout <= MAX_TIMEOUT_SECONDS:  # also refuses nan and inf
            raise EnqueueError(
                f"timeout must be more than 0 and at most {MAX_TIMEOUT_SECONDS:,} seconds "
                f"(a week), not {timeout}"
            )
        timeout = float(timeout)
    return NewJob(
        task=task_name,
        queue=queue,
        tenant_id=request.tenant_id,
        priority=request.priority,
        max_attempts=max_attempts,
        delay_seconds=delay,
        run_at=request.run_at,
        unique_key=request.unique_key,
        timeout_seconds=timeout,
    )


def _prepare_all(requests: list[JobRequest], tasks: TaskRegistry) -> list[NewJob]:
    """:func:`_prepare` for a batch, once for the requests that differ only in their payload
    (most of a batch: about a microsecond a job saved). They share the one NewJob it gives.
    Every number's type is part of what makes two requests alike: ``True == 1``, and a
    priority of ``True`` is refused where one of ``1`` is not."""
    checked: dict[tuple[Any, ...], NewJob] = {}
    jobs = []
    for request in requests:
        alike = (
            request.task, request.queue, request.run_at, request.unique_key,
            type(request.priority), request.priority,
            type(request.max_attempts), request.max_attempts,
            type(request.tenant_id), request.tenant_id,
            type(request.delay), request.delay,
            type(request.timeout), request.timeout,
        )  # fmt: skip
        try:
            job = checked.get(alike)
        except TypeError:  # something unhashable, which _prepare refuses with its sentence
            job = None
        if job is None:
            job = _prepare(request, tasks)
            with suppress(TypeError):
                checked[alike] = job
        jobs.append(job)
    return jobs


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_text(argument: str, value: str, limit: int, *, in_bytes: bool = False) -> None:
    if unstorable(value):
        raise EnqueueError(
            f"{argument} holds a NUL character or an unpaired surrogate, which PostgreSQL text "
            "cannot store"
        )
    size = len(value.encode()) if in_bytes else len(value)
    if size > limit:
        unit = "bytes" if in_bytes else "characters"
        raise EnqueueError(f"{argument} is {size:,} {unit} long; at most {limit:,}")


def _check_run_at(run_at: datetime) -> None:
    if not isinstance(run_at, datetime):
        raise EnqueueError(f"run_at must be a datetime, not {type(run_at).__name__}")
    if run_at.utcoffset() is None:
        raise EnqueueError("run_at must be a timezone-aware datetime")
    latest = datetime.now(UTC) + timedelta(seconds=MAX_DELAY_SECONDS)
    if not EARLIEST_RUN_AT <= run_at <= latest:
        raise EnqueueError(
            f"run_at must be between {EARLIEST_RUN_AT:%Y-%m-%d} and ten years from now "
            f"({latest:%Y-%m-%d}), not {run_at.isoformat()}"
        )


def _json_or_none(trace_context: dict[str, str] | None) -> str | None:
    return json.dumps(trace_context) if trace_context else None


@cache
def _valid_queue_name(name: str) -> bool:
    return QUEUE_NAME.match(name) is not None


def _payloads_json(requests: list[JobRequest], limit: int) -> str:
    """Every payload of a batch as one JSON array: one encoder call instead of one per job.

    Only when the batch is bad or big are payloads encoded one by one, to name the culprit.
    """
    payloads = [request.payload or {} for request in requests]
    try:
        if all(type(payload) is dict or isinstance(payload, Mapping) for payload in payloads):
            text = _JSON.encode(payloads)
            # No payload can be over the limit, and none holds what PostgreSQL cannot store.
            if len(text) * 4 <= limit and not _unstorable_json(text):
                return text
    except (TypeError, ValueError):
        pass
    return "[" + ",".join(_payload_json(r.task, r.payload, limit) for r in requests) + "]"


def _payload_json(task: str, payload: Mapping[str, Any] | None, limit: int) -> str:
    if payload is None:
        return "{}"
    if not isinstance(payload, Mapping):
        raise EnqueueError(
            f"payload of task {task!r} must be a JSON object (a mapping), "
            f"not {type(payload).__name__}"
        )
    try:
        text = _JSON.encode(payload)
    except (TypeError, ValueError) as error:
        raise EnqueueError(f"payload of task {task!r} is not JSON: {error}") from None
    if _unstorable_json(text):
        raise EnqueueError(
            f"payload of task {task!r} holds a NUL character (\\u0000) or an unpaired "
            "surrogate, which PostgreSQL's jsonb cannot store"
        )
    # UTF-8 needs at most 4 bytes a character: short texts need no encoding to be measured.
    if len(text) * 4 > limit and (size := len(text.encode())) > limit:
        raise PayloadTooLarge(
            f"payload of task {task!r} is {size:,} bytes; the limit is {limit:,} bytes "
            "(store large data elsewhere and pass a reference)"
        )
    return text


def _unstorable_json(text: str) -> bool:
    """True when JSON ``text`` holds an escaped NUL (jsonb refuses it) or a raw unpaired
    surrogate (which cannot be encoded to send). The encoder escapes every control character,
    so a NUL is there only as the six characters ``\\u0000``, and a surrogate only in text that
    is not all ASCII: both looked for by the quick test first (the escape's pattern alone cost
    half a microsecond a job of a 1,000-job batch)."""
    return ("\\u0000" in text and _JSON_NUL.search(text) is not None) or (
        not text.isascii() and unstorable(text)
    )
