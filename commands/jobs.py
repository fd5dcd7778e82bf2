"""`flask --app app jobs ...`: enqueue, inspect and operate jobs from a shell.

Every bad argument exits non-zero with one sentence saying what to fix, before anything is written.
"""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click
import psycopg
from flask import current_app
from flask.cli import AppGroup

from jobqueue.backoff import DEFAULT_MAX_ATTEMPTS
from jobqueue.enqueue import QUEUE_NAME, JobRequest, enqueue_many
from jobqueue.errors import EnqueueError, OperationRefused
from jobqueue.registry import registry
from jobqueue.store import JobStore
from jobqueue.text import unstorable

jobs_cli = AppGroup("jobs", help="Enqueue, inspect and operate background jobs.")


@contextmanager
def _store() -> Iterator[JobStore]:
    """A store on a fresh connection; the transaction commits when the block ends cleanly."""
    with psycopg.connect(current_app.config["DATABASE_URL"]) as connection:
        yield JobStore(connection)


MAX_COUNT = 100_000  # copies per `jobs enqueue`; enqueue_many takes them in one statement
BIGINT_MAX = 2**63 - 1


def _tenant_id(store: JobStore, slug: str | None) -> int | None:
    if slug is None:
        return None
    if unstorable(slug) or len(slug) > 200:
        raise click.ClickException("--tenant must be a tenant's slug, e.g. --tenant acme")
    row = store.connection.execute("SELECT id FROM tenants WHERE slug = %s", (slug,)).fetchone()
    if row is None:
        raise click.ClickException(f"unknown tenant {slug!r}; create it first or check the slug")
    return int(row[0])


def _payload(text: str) -> dict[str, Any]:
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise click.ClickException(f"--payload is not valid JSON: {error}") from None
    if not isinstance(payload, dict):
        raise click.ClickException("--payload must be a JSON object, e.g. '{\"seconds\": 2}'")
    return payload


def _run_at(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise click.ClickException(
            f"--at {text!r} is not an ISO 8601 time, e.g. 2026-12-01T09:00:00+00:00"
        ) from None
    if moment.utcoffset() is None:
        raise click.ClickException(f"--at {text!r} needs a UTC offset, e.g. {text}+00:00")
    return moment


@jobs_cli.command("enqueue")
@click.argument("task")
@click.option("--queue", help="Queue name (default: the task's queue).")
@click.option("--payload", "payload_text", default="{}", help="JSON object of arguments.")
@click.option("--delay", type=float, help="Seconds from now before the job may run.")
@click.option("--at", "at_text", help="ISO 8601 time at which the job may run.")
@click.option("--priority", type=int, default=0, help="Lower runs first (default 0).")
@click.option("--max-attempts", type=int, help="Attempts before the job is dead.")
@click.option("--count", type=int, default=1, help="Enqueue this many copies.")
@click.option("--tenant", help="Slug of the owning tenant (default: system).")
def enqueue_command(
    task: str,
    queue: str | None,
    payload_text: str,
    delay: float | None,
    at_text: str | None,
    priority: int,
    max_attempts: int | None,
    count: int,
    tenant: str | None,
) -> None:
    """Enqueue TASK and print the new job ids (or, with --count over 10, how many)."""
    if task not in registry:
        known = ", ".join(t.name for t in registry)
        raise click.ClickException(f"unknown task {task!r}; registered tasks are: {known}")
    if delay is not None and at_text is not None:
        raise click.ClickException("give --delay or --at, not both")
    if not 1 <= count <= MAX_COUNT:
        raise click.ClickException(f"--count must be between 1 and {MAX_COUNT:,}, not {count:,}")
    payload = _payload(payload_text)
    run_at = _run_at(at_text)
    with _store() as store:
        request = JobRequest(
            task=task,
            payload=payload,
            queue=queue,
            delay=delay,
            run_at=run_at,
            priority=priority,
            max_attempts=max_attempts,
            tenant_id=_tenant_id(store, tenant),
        )
        try:
            ids = enqueue_many(store.connection, [request] * count)
        except EnqueueError as error:
            raise click.ClickException(_as_option(str(error))) from None
    if count > 10:
        click.echo(f"enqueued {count} jobs ({ids[0]}..{ids[-1]})")
    else:
        click.echo("\n".join(map(str, ids)))


@jobs_cli.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def stats_command(as_json: bool) -> None:
    """Print job counts per queue and state."""
    with _store() as store:
        counts = store.state_counts()
        queues = store.queues()
    paused = {queue["name"] for queue in queues if queue["paused"]}
    for queue in queues:
        counts.setdefault(queue["name"], {})
    if as_json:
        click.echo(json.dumps({"queues": counts, "paused": sorted(paused)}, sort_keys=True))
        return
    states = ["available", "scheduled", "running", "succeeded", "dead", "cancelled"]
    click.echo(f"{'queue':<20}" + "".join(f"{state:>11}" for state in states))
    for queue in sorted(counts):
        row = "".join(f"{counts[queue].get(state, 0):>11}" for state in states)
        suffix = "  (paused)" if queue in paused else ""
        click.echo(f"{queue:<20}{row}{suffix}")


@jobs_cli.command("requeue")
@click.argument("job_id", type=click.IntRange(1, BIGINT_MAX))
def requeue_command(job_id: int) -> None:
    """Put dead or cancelled job JOB_ID back to work with a fresh attempt budget."""
    with _store() as store:
        job = store.get(job_id)
        if job is None:
            raise click.ClickException(f"there is no job {job_id}")
        task = registry.get(job["task"])
        budget = task.retry.max_attempts if task else DEFAULT_MAX_ATTEMPTS
        try:
            requeued = store.requeue(job_id, budget)
        except OperationRefused as error:
            raise click.ClickException(str(error)) from None
        if not requeued:
            raise click.ClickException(
                f"job {job_id} is {job['state']}; only dead or cancelled jobs can be requeued"
            )
    click.echo(f"job {job_id} requeued")


@jobs_cli.command("pause")
@click.argument("queue")
def pause_command(queue: str) -> None:
    """Stop workers from claiming jobs of QUEUE (running jobs finish)."""
    _check_queue_name(queue)
    with _store() as store:
        store.pause_queue(queue, paused_by="cli")
    click.echo(f"queue {queue} paused")


@jobs_cli.command("resume")
@click.argument("queue")
def resume_command(queue: str) -> None:
    """Let workers claim jobs of QUEUE again."""
    _check_queue_name(queue)
    with _store() as store:
        if not store.resume_queue(queue):
            raise click.ClickException(f"there is no queue {queue!r}")
    click.echo(f"queue {queue} resumed")


def _check_queue_name(queue: str) -> None:
    if not QUEUE_NAME.match(queue):
        raise click.ClickException(
            f"queue name {queue!r} is invalid: use 1-63 lowercase letters, digits, '_', '.' or '-'"
        )


OPTION_NAMES = {
    "delay": "--delay",
    "run_at": "--at",
    "max_attempts": "--max-attempts",
    "priority": "--priority",
    "payload": "--payload",
}


def _as_option(message: str) -> str:
    """An enqueue error in the words of this command's options (``run_at`` is ``--at``)."""
    first, _, rest = message.partition(" ")
    return f"{OPTION_NAMES.get(first, first)} {rest}"
