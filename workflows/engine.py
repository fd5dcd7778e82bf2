"""Acts on executions from outside a slice: start, send an event, cancel, resume.

Each takes the caller's connection (a psycopg connection or a SQLAlchemy Session/Connection, as
``jobqueue.enqueue`` does) and works inside the caller's transaction: an execution started with
the rows that call for it commits or rolls back with them. A refused act raises
:class:`ActionRefused` with a sentence that says why, and changes nothing.
"""

import json
from dataclasses import dataclass
from typing import Any

import psycopg
from opentelemetry import propagate

from jobqueue import telemetry
from jobqueue.enqueue import psycopg_connection
from workflows.errors import ActionRefused, EventRefused, StartError
from workflows.registry import WorkflowRegistry, registry
from workflows.runtime import FINISHED, enqueue_slice
from workflows.store import JSON_ENCODER, WorkflowStore, slice_key

MAX_KEY_CHARS = 200


@dataclass(frozen=True, slots=True)
class Started:
    execution_id: int
    created: bool  # False: an unfinished execution held the idempotency key and is returned


def start_workflow(
    connection: Any,
    name: str,
    input: dict[str, Any] | None = None,  # the column is named input
    *,
    tenant_id: int | None = None,
    idempotency_key: str | None = None,
    parent_id: int | None = None,
    workflows: WorkflowRegistry = registry,
) -> Started:
    """Start workflow ``name`` with ``input`` (its keyword arguments) in the caller's transaction.

    With ``idempotency_key``, while an unfinished execution of the same name and tenant holds the
    key, that execution is returned instead; with another input, the start is refused.
    """
    definition = workflows.get(name)
    if definition is None:
        raise StartError(f"no workflow named {name!r} is registered")
    if input is not None and not isinstance(input, dict):
        raise StartError(f"a workflow's input is a JSON object, not {type(input).__name__}")
    try:
        input_json = JSON_ENCODER.encode(input or {})
    except (TypeError, ValueError) as error:
        raise StartError(f"the input of workflow {name!r} is not JSON: {error}") from None
    if idempotency_key is not None and not 0 < len(idempotency_key) <= MAX_KEY_CHARS:
        raise StartError(f"idempotency_key must be 1 to {MAX_KEY_CHARS} characters")
    conn = psycopg_connection(connection)
    store = WorkflowStore(conn)
    with conn.transaction():
        inserted = store.insert_execution(
            name,
            definition.version,
            input_json,
            tenant_id,
            idempotency_key,
            parent_id,
            _trace_context(),
        )
        if inserted is None and idempotency_key is not None:
            existing = store.find_unfinished(name, tenant_id, idempotency_key)
            if existing is None:  # it finished between the insert and the look-up
                return start_workflow(
                    conn,
                    name,
                    input,
                    tenant_id=tenant_id,
                    idempotency_key=idempotency_key,
                    parent_id=parent_id,
                    workflows=workflows,
                )
            execution_id, _, stored_input = existing
            if stored_input != json.loads(input_json):
                raise StartError(
                    f"execution {execution_id} of workflow {name!r} already holds idempotency "
                    f"key {idempotency_key!r} with another input"
                )
            return Started(execution_id, created=False)
        if inserted is None:
            raise RuntimeError(f"workflow {name!r}: the execution was not inserted")
        execution_id, owner = inserted
        enqueue_slice(conn, execution_id, owner)
    return Started(execution_id, created=True)


def send_event(
    connection: Any,
    execution_id: int,
    key: str,
    payload: Any = None,
    *,
    decided_by: str | None = None,
    tenant_id: int | None = None,
) -> None:
    """Satisfy the execution's wait on ``key`` with ``payload``, exactly once.

    ``tenant_id`` (when given) must own the execution. Refused, with :class:`EventRefused`: an
    execution that is not waiting for ``key``, a wait already decided, and a wait whose timeout
    has passed.
    """
    conn = psycopg_connection(connection)
    store = WorkflowStore(conn)
    with conn.transaction():
        execution = _locked(store, execution_id, tenant_id, EventRefused)
        status = execution["status"]
        if status in FINISHED:
            raise EventRefused(f"execution {execution_id} is {status}: it waits for nothing")
        wait = store.event_wait(execution_id, key)
        if wait is None:
            raise EventRefused(f"execution {execution_id} is not waiting for {key!r}")
        if wait["outcome"] == "event":
            who = f" by {wait['decided_by']}" if wait["decided_by"] else ""
            raise EventRefused(
                f"{key!r} was already decided{who} at {wait['satisfied_at']:%Y-%m-%d %H:%M:%S %Z}"
                "; a second decision changes nothing"
            )
        if wait["outcome"] == "timeout" or (wait["outcome"] is None and wait["due"]):
            raise EventRefused(
                f"the wait for {key!r} timed out at {wait['wake_at']:%Y-%m-%d %H:%M:%S %Z}; "
                "this late event changes nothing"
            )
        if wait["outcome"] is not None:
            raise EventRefused(f"the wait for {key!r} was {wait['outcome']}")
        try:
            payload_json = json.loads(JSON_ENCODER.encode(payload))
        except (TypeError, ValueError) as error:
            raise EventRefused(f"the event's payload is not JSON: {error}") from None
        store.satisfy(execution_id, wait["step_id"], payload_json, decided_by)
        owner = execution["tenant_id"]
        if not store.wake_job(owner, slice_key(execution_id)):
            enqueue_slice(conn, execution_id, owner)


def cancel_execution(connection: Any, execution_id: int, *, tenant_id: int | None = None) -> str:
    """Cancel an unfinished execution; returns the status it had. A waiting or pending one is
    cancelled at once; a running one stops at its next step boundary."""
    conn = psycopg_connection(connection)
    store = WorkflowStore(conn)
    with conn.transaction():
        execution = _locked(store, execution_id, tenant_id, ActionRefused)
        status = str(execution["status"])
        if status in FINISHED:
            raise ActionRefused(f"execution {execution_id} is already {status}")
        store.cancel(execution_id)
        store.cancel_job(execution["tenant_id"], slice_key(execution_id))
    return status


def resume_execution(
    connection: Any, execution_id: int, *, tenant_id: int | None = None
) -> dict[str, Any] | None:
    """Resume a failed execution from its failed step (after a fix): the step's error is
    forgotten and a replay runs it again. Returns the forgotten step (step_id, name, error), or
    None when the workflow code itself had raised."""
    conn = psycopg_connection(connection)
    store = WorkflowStore(conn)
    with conn.transaction():
        execution = _locked(store, execution_id, tenant_id, ActionRefused)
        if execution["status"] != "failed":
            raise ActionRefused(
                f"only a failed execution can be resumed; execution {execution_id} is "
                f"{execution['status']}"
            )
        try:
            with conn.transaction():
                forgotten = store.resume(execution_id)
        except psycopg.errors.UniqueViolation:
            raise ActionRefused(
                f"execution {execution_id} cannot be resumed: another unfinished execution "
                "holds its idempotency key"
            ) from None
        enqueue_slice(conn, execution_id, execution["tenant_id"])
    return forgotten


def _trace_context() -> str | None:
    """The W3C context of the span that starts the execution (a request's), as JSON."""
    if not telemetry.active():
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return json.dumps(carrier) if carrier else None


def _locked(
    store: WorkflowStore, execution_id: int, tenant_id: int | None, refusal: type[ActionRefused]
) -> dict[str, Any]:
    execution = store.lock(execution_id)
    if execution is None or (tenant_id is not None and execution["tenant_id"] != tenant_id):
        raise refusal(f"there is no workflow execution {execution_id} in your tenant")
    return execution
