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

# Notice a dead server or a cut network within seconds instead of hanging on a socket:
# tcp_user_timeout for a statement the network swallowed (sent, never acknowledged: TCP would
# retransmit it for 15 minutes), and keepalives for the rest, including a statement that was
# acknowledged but whose answer a cut link then lost (the probes start after 5 s of silence,
# and 3 unanswered ones 2 s apart close the connection). Neither bounds how long a statement
# may run: the server's host answers probes and acknowledges data while it works.
CONNECT_OPTIONS: dict[str, Any] = {
    "connect_timeout": 10,
    "tcp_user_timeout": 10_000,  # milliseconds
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
}


# What a server says when it will refuse us however long we wait: no such database or role, a
# bad or missing password, no pg_hba.conf line for us, a role that may not log in. Any other
# refusal passes (starting up, shutting down, in recovery, not yet accepting connections after
# a crash, out of connection slots): a worker waits for it, for up to connect_wait_seconds.
LASTING_REFUSALS = (
    "does not exist",
    "authentication failed",
    "no password supplied",
    "no pg_hba.conf entry",
    "is not permitted to log in",
    "permission denied",
)


def refused_for_good(reason: str) -> bool:
    return "FATAL:" in reason and any(text in reason for text in LASTING_REFUSALS)


class DatabaseNotReady(Exception):
    """The database cannot serve a worker: unreachable, misconfigured or not migrated."""

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable


def check_database(url: str, wait_seconds: float, prepare_threshold: int | None = None) -> None:
    """Return once the database answers and holds the engine's tables.

    An unreachable server is retried with backoff for up to ``wait_seconds`` (it may be starting);
    a malformed URL or a database without the schema fails at once.
    """
    deadline = time.monotonic() + wait_seconds
    delay = 0.1
    while True:
        try:
            with psycopg.connect(
                url, prepare_threshold=prepare_threshold, **CONNECT_OPTIONS
            ) as connection:
                row = connection.execute("SELECT to_regclass('jobs') IS NOT NULL").fetchone()
        except psycopg.ProgrammingError as error:
            raise DatabaseNotReady(
                f"DATABASE_URL is not usable: {error}", retryable=False
            ) from None
        except psycopg.OperationalError as error:
            reason = _first_line(error)
            if refused_for_good(reason):
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
    """A dedicated autocommit connection that survives what the server and the network do.

    ``call`` runs a function with a :class:`JobStore` on the connection. A statement the server
    rolled back while the connection stayed up (a deadlock, a serialization failure, a lock or
    statement timeout) is tried again on the same connection, after a short pause; a broken
    connection is closed, reopened with backoff and jitter, and the call tried again. Either way
    it goes on until it succeeds, ``tries`` is used up or ``stop`` is set, in which case it
    returns ``None``. Any other error (a bug, a row the database refuses) is raised.

    ``prepare_threshold`` is psycopg's (its default, 5, here): the engine passes
    ``WorkerSettings.prepare_after``, None behind a transaction pooler, whose server connections
    keep no prepared statement of their clients.

    Unless ``pooled`` (a transaction pooler, where a session setting would land on whichever
    server connection served it), the session turns JIT compilation off: the engine's
    statements are short, and PostgreSQL compiled a batch's job_finish whenever its estimated
    cost passed jit_above_cost, 1.2 s of a 1.3 s statement, on every batch (in a soak, the
    drain fell from 4,500 to 800 jobs/s). Behind a pooler, set it on the role instead
    (docs/howto/run-behind-pgbouncer.md).

    ``reuse_plans`` (again unless ``pooled``) makes the session keep one generic plan per
    prepared statement (``plan_cache_mode = force_generic_plan``). Left to itself, PostgreSQL
    planned the claim afresh at every call, because each custom plan's estimate beat the
    generic one's, though both plans are the same index scans: planning was a third of the
    claim's time. Only for a link that runs nothing but claims: the setting applies to
    unprepared statements too, and those planned per batch (``PLANNED_PER_BATCH``) must not get
    a generic plan. Such a link also prepares its statements at their
    first run instead of their fifth: the listener claims only when a job is enqueued, so each
    of its first five claims was planned afresh (2 to 6 ms on a worker that had just started,
    the slowest pickups of a latency run).
    """

    def __init__(
        self,
        url: str,
        name: str,
        stop: threading.Event,
        *,
        max_delay: float = 5.0,
        prepare_threshold: int | None = 5,
        pooled: bool = False,
        reuse_plans: bool = False,
    ) -> None:
        self.url = url
        self.name = name
        self.stop = stop
        self.max_delay = max_delay
        self.prepare_threshold = prepare_threshold
        self.pooled = pooled
        self.reuse_plans = reuse_plans
        self.connection: psycopg.Connection[Any] | None = None
        self.on_connect: Callable[[psycopg.Connection[Any]], None] | None = None
        self._store: JobStore | None = None  # the connection's, kept with what it keeps

    def connect(self) -> psycopg.Connection[Any]:
        if self.connection is None or self.connection.closed:
            threshold = self.prepare_threshold
            if self.reuse_plans and threshold is not None:
                threshold = 0  # planned once, at the first claim, not at each of the first five
            self.connection = psycopg.connect(
                self.url,
                autocommit=True,
                prepare_threshold=threshold,
                **CONNECT_OPTIONS,
            )
            if not self.pooled:
                self.connection.execute("SET jit = off")
                if self.reuse_plans:
                    self.connection.execute("SET plan_cache_mode = force_generic_plan")
            if self.on_connect is not None:
                self.on_connect(self.connection)
        return self.connection

    def call(self, operation: Callable[[JobStore], T], *, tries: int | None = None) -> T | None:
        """``tries`` bounds the attempts; ``None`` means until ``stop`` is set."""
        failures = 0
        while True:
            try:
                return operation(self.store())
            except (psycopg.OperationalError, psycopg.errors.ReadOnlySqlTransaction) as error:
                # A read-only error: the server we reached is (now) a standby, e.g. an old
                # primary brought back as one; reconnecting finds the primary.
                failures += 1
                if isinstance(error, psycopg.OperationalError) and rolled_back_by_server(
                    error, self.connection
                ):
                    delay = min(self.max_delay, 0.01 * 2**failures) * random.uniform(0.5, 1.0)  # noqa: S311
                    log.warning(
                        "%s: the server rolled the statement back (%s: %s); retrying",
                        self.name,
                        type(error).__name__,
                        _first_line(error),
                    )
                else:
                    self.close()
                    delay = min(self.max_delay, 0.05 * 2**failures) * random.uniform(0.5, 1.0)  # noqa: S311
                    log.warning(
                        "%s: database connection lost (%s); retrying in %.2fs",
                        self.name,
                        _first_line(error),
                        delay,
                    )
                if (tries is not None and failures >= tries) or self.stop.wait(delay):
                    return None

    def store(self) -> JobStore:
        """The store of the connection, one for as long as the connection lasts."""
        connection = self.connect()
        if self._store is None or self._store.connection is not connection:
            self._store = JobStore(connection)
        return self._store

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.close()
            finally:
                self.connection = None


# SQLSTATE class 40: the server rolled the transaction back (40001 serialization failure, 40P01
# deadlock detected); 55P03 lock_not_available and 57014 query_canceled end one statement.
TRANSACTION_ROLLBACK = "40"
SINGLE_STATEMENT_FAILURES = frozenset({"55P03", "57014"})


def rolled_back_by_server(
    error: psycopg.OperationalError, connection: psycopg.Connection[Any] | None
) -> bool:
    """True when the server refused or undid one statement and the connection is still good:
    a deadlock or serialization failure, a lock or statement timeout, a cancelled query. Those
    are retried on the same connection; they say nothing about the network."""
    if connection is None or connection.closed or connection.broken:
        return False
    sqlstate = error.sqlstate or ""
    return sqlstate.startswith(TRANSACTION_ROLLBACK) or sqlstate in SINGLE_STATEMENT_FAILURES


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else repr(error)
