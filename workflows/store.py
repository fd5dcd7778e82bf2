"""WorkflowStore: runs the named statements of workflows/queries.sql on one psycopg connection.

Like the engine's JobStore it never commits: whoever owns the connection owns the transaction.
"""

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from jobqueue.queries import Query, parse

# Every JSON the workflows write: compact, no NaN (jsonb refuses it), text as it is.
JSON_ENCODER = json.JSONEncoder(allow_nan=False, separators=(",", ":"), ensure_ascii=False)


def slice_key(execution_id: int) -> str:
    """The unique key of an execution's slice job: one waiting or running job per execution."""
    return f"workflow:{execution_id}"


@cache
def all_queries() -> dict[str, Query]:
    return parse(resources.files("workflows").joinpath("queries.sql").read_text())


@dataclass(frozen=True, slots=True)
class Recorded:
    """One checkpointed step as operation_outputs holds it."""

    step_id: int
    name: str
    kind: str
    output: Any
    error: str | None
    attempts: int


@dataclass(frozen=True, slots=True)
class Checkpoint(Recorded):
    """A step's result as a slice writes it to operation_outputs (times by the slice's clock, in
    epoch seconds: an external step's checkpoint may be written with the next boundary, after it
    finished)."""

    started_at: float | None
    finished_at: float | None

    @staticmethod
    def params_of(checkpoint: "Checkpoint | None") -> dict[str, Any]:
        if checkpoint is None:
            return dict.fromkeys(
                ("step_id", "name", "kind", "output", "error", "attempts", "started_at",
                 "finished_at")
            )  # fmt: skip
        return {
            "step_id": checkpoint.step_id,
            "name": checkpoint.name,
            "kind": checkpoint.kind,
            "output": None if checkpoint.error is not None else Jsonb(checkpoint.output),
            "error": checkpoint.error,
            "attempts": checkpoint.attempts,
            "started_at": checkpoint.started_at,
            "finished_at": checkpoint.finished_at,
        }


@dataclass(frozen=True, slots=True)
class End:
    """How an execution ends: succeeded with its output, or failed with its error."""

    status: str
    output: Any
    error: str | None


@dataclass(frozen=True, slots=True)
class Guarded:
    """What a step boundary found: the execution's status (running once marked), whether the
    slice's fence held, and whether the held-back checkpoint (if any) was written."""

    status: str
    fenced: bool
    recorded: bool


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a slice starts from: the execution, its recorded steps, its open waits' positions."""

    execution: dict[str, Any]
    steps: list[Recorded]
    open_waits: dict[int, tuple[str, str | None]]


@dataclass(frozen=True, slots=True)
class Fence:
    """Who runs a slice: its job's (id, attempt) and the worker holding the lease."""

    job_id: int
    attempt: int
    worker: str

    def params(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "attempt": self.attempt, "worker": self.worker}


@dataclass(frozen=True, slots=True)
class Boundary:
    """A slice's step boundary written alone: its held checkpoint and, at the end, its end."""

    store: "WorkflowStore"
    execution_id: int
    fence: Fence
    held: Checkpoint | None
    end: End | None

    def as_row(self) -> list[Any]:
        """The boundary as a row of ``step_guard_many``'s JSON: its values by position, outputs
        boxed (see there)."""
        held, end, fence = self.held, self.end, self.fence
        row: list[Any] = [self.execution_id, fence.job_id, fence.attempt, fence.worker]
        if held is None:
            row += NO_CHECKPOINT
        else:
            row += (
                held.step_id,
                held.name,
                held.kind,
                None if held.error is not None else [held.output],
                held.error,
                held.attempts,
                held.started_at,
                held.finished_at,
            )
        if end is None:
            row += NO_END
        else:
            row += (end.status, [end.output] if end.status == "succeeded" else None, end.error)
        return row


NO_CHECKPOINT = (None,) * 8
NO_END = (None,) * 3


def load_slices(requests: list[tuple["WorkflowStore", int]]) -> list[Loaded | None]:
    """What each slice starts from: ``slice_load`` for one, ``slice_load_many`` for a group
    (gathered by :func:`jobqueue.cooperative.gather`; every store of a group shares its
    connection)."""
    store = requests[0][0]
    if len(requests) == 1:
        return [store.load(requests[0][1])]
    return store.load_many([execution_id for _, execution_id in requests])


def guard_boundaries(boundaries: list[Boundary]) -> list[Guarded | Exception]:
    """Each boundary's :meth:`WorkflowStore.guard`: in one statement for a group (gathered by
    :func:`jobqueue.cooperative.gather`), each row in its own transaction otherwise. If the
    database refuses the group's statement for a reason other than the connection, each is
    written alone, so that one bad row fails only its own slice (its answer is the error)."""
    store = boundaries[0].store
    if len(boundaries) == 1:
        (one,) = boundaries
        return [store.guard(one.execution_id, one.fence, one.held, one.end)]
    try:
        return list(store.guard_many(boundaries))
    except psycopg.OperationalError:
        raise
    except psycopg.Error:
        answers: list[Guarded | Exception] = []
        for one in boundaries:
            try:
                answers.append(store.guard(one.execution_id, one.fence, one.held, one.end))
            except psycopg.OperationalError:
                raise
            except psycopg.Error as error:
                answers.append(error)
        return answers


class WorkflowStore:
    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self._queries = all_queries()

    def _execute(self, name: str, params: dict[str, Any]) -> psycopg.Cursor[Any]:
        return self.connection.execute(self._queries[name].sql, params)

    def _row(self, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries[name].sql, params)
            return cursor.fetchone()

    # -- start ---------------------------------------------------------------------------------

    def insert_execution(
        self,
        name: str,
        version: int,
        input_json: str,
        tenant_id: int | None,
        idempotency_key: str | None,
        parent_id: int | None,
        trace_context: str | None,
    ) -> tuple[int, int] | None:
        params = {
            "name": name,
            "version": version,
            "input": input_json,
            "tenant_id": tenant_id,
            "idempotency_key": idempotency_key,
            "parent_id": parent_id,
            "trace_context": trace_context,
        }
        row = self._execute("execution_insert", params).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def find_unfinished(
        self, name: str, tenant_id: int | None, idempotency_key: str
    ) -> tuple[int, int, Any] | None:
        params = {"name": name, "tenant_id": tenant_id, "idempotency_key": idempotency_key}
        row = self._execute("execution_find_unfinished_by_key", params).fetchone()
        return None if row is None else (int(row[0]), int(row[1]), row[2])

    # -- reading -------------------------------------------------------------------------------

    def get(self, execution_id: int) -> dict[str, Any] | None:
        return self._row("execution_get", {"id": execution_id})

    def lock(self, execution_id: int) -> dict[str, Any] | None:
        return self._row("execution_lock", {"id": execution_id})

    def load(self, execution_id: int) -> Loaded | None:
        """What a slice starts from (one round trip); None when the execution is gone."""
        row = self._execute("slice_load", {"id": execution_id}).fetchone()
        return None if row is None else _loaded(row)

    def load_many(self, execution_ids: list[int]) -> list[Loaded | None]:
        """:meth:`load` for several slices in one round trip, in the order asked."""
        row = self._execute("slice_load_many", {"ids": execution_ids}).fetchone()
        found = {one[0]: _loaded(one) for one in (row[0] if row else [])}
        return [found.get(execution_id) for execution_id in execution_ids]

    def step(self, execution_id: int, step_id: int) -> Recorded:
        row = self._execute("step_get", {"execution_id": execution_id, "step_id": step_id})
        found = row.fetchone()
        if found is None:
            raise LookupError(f"execution {execution_id} has no step {step_id}")
        return Recorded(*found)

    # -- a slice -------------------------------------------------------------------------------

    def guard(
        self,
        execution_id: int,
        fence: Fence,
        held: Checkpoint | None = None,
        end: End | None = None,
    ) -> Guarded:
        """The step boundary (``step_guard``): lock the execution and the slice's job, mark the
        execution running, write the ``held`` checkpoint, and with ``end`` end the execution."""
        params: dict[str, Any] = {
            "execution_id": execution_id,
            **fence.params(),
            **Checkpoint.params_of(held),
            "end_status": None if end is None else end.status,
            "end_output": None if end is None or end.status != "succeeded" else Jsonb(end.output),
            "end_error": None if end is None else end.error,
        }
        found = self._execute("step_guard", params).fetchone()
        if found is None:
            return Guarded("gone", fenced=False, recorded=False)
        return Guarded(str(found[0]), fenced=bool(found[1]), recorded=bool(found[2]))

    def guard_many(self, boundaries: list["Boundary"]) -> list[Guarded]:
        """:meth:`guard` for several slices' boundaries in one statement (``step_guard_many``),
        in the order given."""
        rows = [boundary.as_row() for boundary in boundaries]
        answer = self._execute(
            "step_guard_many", {"boundaries": JSON_ENCODER.encode(rows)}
        ).fetchone()
        found = {
            int(execution_id): Guarded(str(status), fenced=bool(fenced), recorded=bool(recorded))
            for execution_id, status, fenced, recorded in (answer[0] if answer else [])
        }
        gone = Guarded("gone", fenced=False, recorded=False)
        return [found.get(boundary.execution_id, gone) for boundary in boundaries]

    @contextmanager
    def relaxed_durability(self, relaxed: bool) -> Iterator[None]:
        """With ``relaxed``, the block's commits on this connection do not wait for their WAL
        flush (``synchronous_commit = off``); the setting is reset after it."""
        if not relaxed:
            yield
            return
        self._execute("session_relax_durability", {})
        try:
            yield
        finally:
            if not self.connection.closed:
                self._execute("session_restore_durability", {})

    def record(self, execution_id: int, checkpoint: Checkpoint) -> bool:
        """Checkpoint a step; False when it was recorded before (the stored row stands)."""
        params = {"execution_id": execution_id, **Checkpoint.params_of(checkpoint)}
        return self._execute("step_record", params).fetchone() is not None

    def wait(self, execution_id: int, step_id: int) -> dict[str, Any] | None:
        return self._row("wait_get", {"execution_id": execution_id, "step_id": step_id})

    def insert_wait(
        self,
        execution_id: int,
        step_id: int,
        kind: str,
        key: str | None,
        seconds: float | None,
        until: datetime | None,
    ) -> datetime | None:
        params = {
            "execution_id": execution_id,
            "step_id": step_id,
            "kind": kind,
            "key": key,
            "seconds": seconds,
            "until": until,
        }
        row = self._execute("wait_insert", params).fetchone()
        return None if row is None else row[0]

    def close_wait(self, execution_id: int, step_id: int, outcome: str) -> None:
        params = {"execution_id": execution_id, "step_id": step_id, "outcome": outcome}
        self._execute("wait_close", params)

    def suspend(self, execution_id: int, fence: Fence) -> int | None:
        """Set the execution waiting and finish the slice's job; its tenant, None if lost."""
        row = self._execute(
            "execution_suspend", {"execution_id": execution_id, **fence.params()}
        ).fetchone()
        return None if row is None else int(row[0])

    # -- events, cancel, resume ----------------------------------------------------------------

    def event_wait(self, execution_id: int, key: str) -> dict[str, Any] | None:
        return self._row("event_wait_find", {"execution_id": execution_id, "key": key})

    def satisfy(
        self, execution_id: int, step_id: int, payload: Any, decided_by: str | None
    ) -> bool:
        params = {
            "execution_id": execution_id,
            "step_id": step_id,
            "payload": Jsonb(payload),
            "decided_by": decided_by,
        }
        return self._execute("event_satisfy", params).fetchone() is not None

    def wake_job(self, tenant_id: int, unique_key: str) -> bool:
        params = {"tenant_id": tenant_id, "unique_key": unique_key}
        return self._execute("slice_job_wake", params).fetchone() is not None

    def cancel_job(self, tenant_id: int, unique_key: str) -> None:
        self._execute("slice_job_cancel", {"tenant_id": tenant_id, "unique_key": unique_key})

    def cancel(self, execution_id: int) -> None:
        self._execute("execution_cancel", {"execution_id": execution_id})

    def resume(self, execution_id: int) -> dict[str, Any] | None:
        return self._row("execution_resume", {"execution_id": execution_id})


def _loaded(row: Sequence[Any]) -> Loaded:
    """A slice's start from ``slice_load``'s values in order (a row, or an array of the group's)."""
    execution_id, tenant_id, name, input, status, steps, open_waits = row
    return Loaded(
        execution={
            "id": execution_id,
            "tenant_id": tenant_id,
            "name": name,
            "input": input,
            "status": status,
        },
        steps=[Recorded(*step) for step in steps],
        open_waits={int(wait[0]): (wait[1], wait[2]) for wait in open_waits},
    )


@dataclass(frozen=True, slots=True)
class ExecutionFilter:
    """The console's filters on the executions list; None means any."""

    tenant_id: int | None = None
    status: str | None = None
    name: str | None = None
    waiting_on: str | None = None  # an open wait's key, or "sleep"
    started_from: datetime | None = None
    started_to: datetime | None = None


class WorkflowInspector:
    """The console's reads of the workflow tables (never writes)."""

    PREVIEW = 200  # characters of an output or payload shown in a list

    def __init__(self, connection: psycopg.Connection[Any]) -> None:
        self.connection = connection
        self._queries = all_queries()

    def _rows(self, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        with self.connection.cursor(row_factory=dict_row) as cursor:
            cursor.execute(self._queries[name].sql, params)
            return cursor.fetchall()

    def executions(
        self, where: ExecutionFilter, before: int | None, limit: int
    ) -> list[dict[str, Any]]:
        params = {
            "tenant_id": where.tenant_id,
            "status": where.status,
            "name": where.name,
            "waiting_on": where.waiting_on,
            "started_from": where.started_from,
            "started_to": where.started_to,
            "before": before,
            "limit": limit,
        }
        return self._rows("console_execution_list", params)

    def execution(self, execution_id: int, tenant_id: int | None) -> dict[str, Any] | None:
        rows = self._rows("console_execution_detail", {"id": execution_id, "tenant_id": tenant_id})
        return rows[0] if rows else None

    def steps(self, execution_id: int) -> list[dict[str, Any]]:
        return self._rows("console_execution_steps", {"id": execution_id, "preview": self.PREVIEW})

    def waits(self, execution_id: int) -> list[dict[str, Any]]:
        return self._rows("console_execution_waits", {"id": execution_id, "preview": self.PREVIEW})

    def jobs(self, execution_id: int, tenant_id: int) -> list[dict[str, Any]]:
        params = {"tenant_id": tenant_id, "unique_key": slice_key(execution_id)}
        return self._rows("console_execution_jobs", params)

    def counts(self, tenant_id: int | None) -> dict[str, Any]:
        return self._rows("console_workflow_counts", {"tenant_id": tenant_id})[0]
