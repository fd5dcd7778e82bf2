"""Workflows the workflow tests run, in the test process and inside worker.py (--tasks)."""

import os
import time
from pathlib import Path
from typing import Any

import psycopg

from jobqueue import PermanentError, RetryPolicy
from workflows import WorkflowContext, workflow

NO_WAIT = RetryPolicy(max_attempts=3, base_seconds=0.0)
WF_TABLES = (
    "CREATE TABLE wf_ledger (execution_id bigint, step int, at timestamptz DEFAULT now(),"
    " PRIMARY KEY (execution_id, step))",
)


def create_workflow_test_tables(conn: psycopg.Connection[Any]) -> None:
    for statement in WF_TABLES:
        conn.execute(statement)


def ledger(connection: psycopg.Connection[Any], execution_id: int, step: int) -> int:
    """A transactional step: one ledger row; the primary key makes a second run fail loudly."""
    connection.execute(
        "INSERT INTO wf_ledger (execution_id, step) VALUES (%s, %s)", (execution_id, step)
    )
    return step * 10 + execution_id


def append_effect(execution_id: int, step: int, pause: float = 0.0) -> str:
    """An external step: a line appended to the effects file (repeats are visible there), then
    ``pause`` seconds before its checkpoint (a kill then repeats the effect)."""
    line = f"{execution_id}:{step}"
    path = Path(os.environ["WF_EFFECTS_FILE"])
    with path.open("a") as effects:
        effects.write(line + "\n")
    time.sleep(pause)
    return line


@workflow("five_steps")
def five_steps(ctx: WorkflowContext, n: int, pause: float = 0.0) -> dict[str, Any]:
    """Three transactional steps writing ledger rows, two external ones appending to a file."""
    a = ctx.step(ledger, ctx.execution_id, 1, name="ledger-1", transactional=True)
    b = ctx.step(append_effect, ctx.execution_id, 2, pause, name="effect-2")
    c = ctx.step(ledger, ctx.execution_id, 3, name="ledger-3", transactional=True)
    d = ctx.step(append_effect, ctx.execution_id, 4, pause, name="effect-4")
    e = ctx.step(ledger, ctx.execution_id, 5, name="ledger-5", transactional=True)
    return {
        "n": n,
        "steps": [
            a - ctx.execution_id,
            b.split(":")[1],
            c - ctx.execution_id,
            d.split(":")[1],
            e - ctx.execution_id,
        ],
    }


@workflow("sleeper")
def sleeper(ctx: WorkflowContext, seconds: float) -> str:
    ctx.step(ledger, ctx.execution_id, 1, name="before", transactional=True)
    ctx.sleep(seconds)
    ctx.step(ledger, ctx.execution_id, 2, name="after", transactional=True)
    return "woke"


@workflow("approval")
def approval(ctx: WorkflowContext, timeout: float | None = None) -> Any:
    ctx.step(ledger, ctx.execution_id, 1, name="asked", transactional=True)
    event = ctx.wait_for("approval", timeout=timeout)
    if event is None:
        return {"timed_out": True}
    ctx.step(ledger, ctx.execution_id, 2, name="decided", transactional=True)
    return {"payload": event.payload, "by": event.decided_by}


def _changed_step(connection: psycopg.Connection[Any], execution_id: int) -> int:
    return ledger(connection, execution_id, 9)


@workflow("versioned")
def versioned(ctx: WorkflowContext) -> str:
    """Version 1 asks for 'go' at step 1; with WF_VARIANT=2 (a deploy that changed the code) a
    step stands there instead."""
    ctx.step(ledger, ctx.execution_id, 1, name="first", transactional=True)
    if os.environ.get("WF_VARIANT") == "2":
        ctx.step(_changed_step, ctx.execution_id, name="inserted", transactional=True)
    ctx.wait_for("go")
    return "done"


def _raced(connection: psycopg.Connection[Any], execution_id: int) -> int:
    """A transaction step that, while it runs, loses its checkpoint to another writer (as to a
    slice that took over its lease): its own ledger row must be rolled back."""
    ledger(connection, execution_id, 1)
    with psycopg.connect(connection.info.dsn, autocommit=True) as other:
        other.execute(
            "INSERT INTO operation_outputs (execution_id, step_id, name, kind, output)"
            " VALUES (%s, 0, 'raced', 'transaction', '-1')",
            (execution_id,),
        )
    return 1


@workflow("raced")
def raced(ctx: WorkflowContext) -> Any:
    first = ctx.step(_raced, ctx.execution_id, name="raced", transactional=True)
    ctx.step(ledger, ctx.execution_id, 2, name="after", transactional=True)
    return first


def needs_flag(flag: str) -> str:
    if not Path(flag).exists():
        raise PermanentError(f"the flag file {flag} is missing")
    return "flag found"


@workflow("fixable")
def fixable(ctx: WorkflowContext, flag: str) -> str:
    ctx.step(ledger, ctx.execution_id, 1, name="before", transactional=True)
    found = ctx.step(needs_flag, flag, name="needs-flag", retry=NO_WAIT)
    ctx.step(ledger, ctx.execution_id, 2, name="after", transactional=True)
    return str(found)


@workflow("two_noops")
def two_noops(ctx: WorkflowContext) -> None:
    """The benchmark's workflow: two no-op steps."""
    ctx.step(_noop, name="one")
    ctx.step(_noop, name="two")


def _noop() -> None:
    return None


def committed_steps(dsn: str, execution_id: int) -> list[int]:
    """An external step that reads, on a connection of its own, the steps of its execution
    whose checkpoints are committed."""
    with psycopg.connect(dsn, autocommit=True) as other:
        rows = other.execute(
            "SELECT step_id FROM operation_outputs WHERE execution_id = %s ORDER BY step_id",
            (execution_id,),
        ).fetchall()
    return [row[0] for row in rows]


@workflow("held_checkpoint")
def held_checkpoint(ctx: WorkflowContext) -> list[int]:
    """Two external steps: the second sees which checkpoints were committed before it ran."""
    ctx.step(_noop, name="first")
    seen: list[int] = ctx.step(committed_steps, ctx.connection.info.dsn, ctx.execution_id,
                               name="probe")  # fmt: skip
    return seen


def _stolen(dsn: str, execution_id: int) -> str:
    """An external step whose checkpoint another writer records while it runs."""
    with psycopg.connect(dsn, autocommit=True) as other:
        other.execute(
            "INSERT INTO operation_outputs (execution_id, step_id, name, kind, output)"
            " VALUES (%s, 0, 'stolen', 'step', '\"stored\"')",
            (execution_id,),
        )
    return "mine"


@workflow("stolen")
def stolen(ctx: WorkflowContext) -> str:
    value: str = ctx.step(_stolen, ctx.connection.info.dsn, ctx.execution_id, name="stolen")
    return value


def synchronous_commit(connection: psycopg.Connection[Any]) -> str:
    """A transaction step that reports its session's synchronous_commit."""
    row = connection.execute("SHOW synchronous_commit").fetchone()
    return str(row[0]) if row else ""


@workflow("relaxed_probe", relaxed_durability=True)
def relaxed_probe(ctx: WorkflowContext) -> str:
    """An opt-in relaxed-durability workflow: its slice's commits do not wait for the WAL."""
    value: str = ctx.step(synchronous_commit, name="probe", transactional=True)
    return value


@workflow("durable_probe")
def durable_probe(ctx: WorkflowContext) -> str:
    value: str = ctx.step(synchronous_commit, name="probe", transactional=True)
    return value


@workflow("two_noops_relaxed", relaxed_durability=True)
def two_noops_relaxed(ctx: WorkflowContext) -> None:
    """The benchmark's workflow with relaxed durability (its own row)."""
    ctx.step(_noop, name="one")
    ctx.step(_noop, name="two")


def nul_text() -> str:
    return "a\x00b"  # jsonb cannot store it


@workflow("nul_result")
def nul_result(ctx: WorkflowContext) -> str:
    """A step whose result holds a NUL character: refused before its checkpoint is written."""
    ctx.step(nul_text, retry=NO_WAIT)
    return "unreached"
