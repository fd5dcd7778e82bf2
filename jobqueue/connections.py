"""Database connections the engine's long-running parts hold: reconnecting, and checked at start."""

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

from jobqueue.store import JobStore

log = logging.getLogger("jobqueue.connections")

T = TypeVar("T")

# Notice a dead server or a cut network within about a minute instead of hanging on a socket.
CONNECT_OPTIONS: dict[str, Any] = {
    "connect_timeout": 10,
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


# A server that answers FATAL refuses for good (no such database or role, bad password), unless
# it says it is starting, stopping, recovering or full: those pass.
PASSING_REFUSALS = ("starting up", "shutting down", "recovery mode", "too many")


def _refused_for_good(reason: str) -> bool:
    return "FATAL:" in reason and not any(text in reason for text in PASSING_REFUSALS)


class DatabaseNotReady(Exception):
    """The database cannot serve a worker: unreachable, misconfigured or not migrated."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def check_database(url: str, wait_seconds: float) -> None:
    """Return once the database answers and holds the engine's tables.

    An unreachable server is retried with backoff for up to ``wait_seconds`` (it may be starting);
    a malformed URL or a database without the schema fails at once.
    """
    deadline = time.monotonic() + wait_seconds
    delay = 0.1
    while True:
        try:
            with psycopg.connect(url, **CONNECT_OPTIONS) as connection:
                row = connection.execute("SELECT to_regclass('jobs') IS NOT NULL").fetchone()
        except psycopg.ProgrammingError as error:
            raise DatabaseNotReady(
                f"DATABASE_URL is not usable: {error}", retryable=False
            ) from None
        except psycopg.OperationalError as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            if _refused_for_good(reason):
                raise DatabaseNotReady(
                    f"the database refused us: {reason}", retryable=False
                ) from None
            if time.monotonic() + delay > deadline:
                raise DatabaseNotReady(
                    f"cannot reach the database within {wait_seconds:g}s: {reason}", retryable=True
                ) from None
            log.warning("database not reachable yet (%s); retrying in %.1fs", reason, delay)
            time.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        if not (row and row[0]):
            raise DatabaseNotReady(
                "the database has no jobs table: run `flask --app app db upgrade` first",
                retryable=False,
            )
        return


class Link:
    """A dedicated autocommit connection that reconnects, with backoff and jitter, after a break.

    ``call`` runs a function with a :class:`JobStore` on the connection; when the connection is
    broken it logs, waits (interrupted by ``stop``), reconnects and tries again until it succeeds
    or ``stop`` is set, in which case it returns ``None``.
    """

    def __init__(self, url: str, name: str, stop: threading.Event) -> None:
        self.url = url
        self.name = name
        self.stop = stop
        self.connection: psycopg.Connection[Any] | None = None
        self.on_connect: Callable[[psycopg.Connection[Any]], None] | None = None

    def connect(self) -> psycopg.Connection[Any]:
        if self.connection is None or self.connection.closed:
            self.connection = psycopg.connect(self.url, autocommit=True, **CONNECT_OPTIONS)
            if self.on_connect is not None:
                self.on_connect(self.connection)
        return self.connection

    def call(self, operation: Callable[[JobStore], T], *, tries: int | None = None) -> T | None:
        """``tries`` bounds the attempts; ``None`` means until ``stop`` is set."""
        failures = 0
        while True:
            try:
                return operation(JobStore(self.connect()))
            except psycopg.OperationalError as error:
                self.close()
                failures += 1
                delay = min(5.0, 0.05 * 2**failures) * random.uniform(0.5, 1.0)  # noqa: S311
                log.warning(
                    "%s: database connection lost (%s); retrying in %.2fs",
                    self.name,
                    str(error).strip().splitlines()[0] if str(error).strip() else error,
                    delay,
                )
                if (tries is not None and failures >= tries) or self.stop.wait(delay):
                    return None

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            finally:
                self.connection = None
