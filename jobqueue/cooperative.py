"""Cooperative groups: several attempts of a task that batches run in one worker thread, each in
a greenlet of its own, and what they ask of the database at the same point runs as one statement.

A task registered with ``batch=N`` has up to N of its claimed jobs handed to one worker thread at
once (fewer when its attempts take long: :class:`GroupSize`). Each attempt runs as usual (its
span, its result), in its own greenlet; the greenlets take turns only where a task calls
:func:`gather`: there it parks, and once every attempt of the group has parked or ended, each
gathered function runs once for all the requests parked on it (one round trip, one commit), and
every parked attempt goes on with its own answer. Outside a group, :func:`gather` runs the
function for its one request at once, so the same task code runs alone too.

The group's attempts share one database connection (:meth:`Group.connection`), in autocommit
mode: a task that needs a transaction opens one with ``connection.transaction()`` and must not
call :func:`gather` inside it (the gathered statement runs on the same connection). While one
attempt runs, the others of its group wait: a batching task's attempts should be short, and
:class:`GroupSize` shrinks the groups of a task whose attempts are not.
"""

import math
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, TypeVar

import psycopg
from greenlet import getcurrent, greenlet

from jobqueue.settings import DEFAULT_GROUP_TARGET_SECONDS

Request = TypeVar("Request")
Answer = TypeVar("Answer")
Result = TypeVar("Result")
Gathered = Callable[[list[Any]], list[Any]]


class _Member(greenlet):  # type: ignore[misc]  # greenlet's class is not typed for subclassing
    """One attempt of a group: runs ``call`` once, in its own greenlet (and contextvars)."""

    def __init__(self, group: "Group", call: Callable[[], Any]) -> None:
        super().__init__(self._body)
        self.group = group
        self.call = call
        self.result: Any = None
        self.error: BaseException | None = None

    def _body(self) -> None:
        try:
            self.result = self.call()
        except BaseException as error:  # kept for Group.run to raise once every member ended
            self.error = error


class Group:
    """One thread's group of attempts; :meth:`run` runs them to their ends."""

    def __init__(
        self, connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
    ) -> None:
        self._connect = connect
        self._connection: psycopg.Connection[Any] | None = None
        self._resources: ExitStack | None = None  # while it runs: what it gives back at its end
        self._parked: dict[Gathered, list[tuple[_Member, Any]]] = {}

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The group's shared connection, in autocommit mode, taken at the first attempt's use
        (so a database that is away fails that attempt, as a pooled connection would)."""
        if self._resources is None:
            raise RuntimeError("a group's connection is used outside its run")
        if self._connection is None or self._connection.closed:
            connection = self._resources.enter_context(self._connect())
            # undone before the connection goes back (callbacks run last in, first out)
            self._resources.callback(_as_lent, connection)
            connection.autocommit = True
            self._connection = connection
        yield self._connection

    def run(self, calls: list[Callable[[], Result]]) -> list[Result]:
        """Run every call in its own greenlet until all have ended; their results, in order.

        A call should not raise (an attempt never does); if one did, the first such error is
        raised here once every call has ended.
        """
        members = [_Member(self, call) for call in calls]
        with ExitStack() as resources:
            self._resources = resources
            try:
                for member in members:
                    member.switch()
                while self._parked:  # the call parked on first, first: attempts go in step
                    gathered = next(iter(self._parked))
                    self._answer(gathered, self._parked.pop(gathered))
            finally:
                self._connection, self._resources = None, None
        for member in members:
            if member.error is not None:
                raise member.error
        return [member.result for member in members]

    def _answer(self, gathered: Gathered, parked: list[tuple[_Member, Any]]) -> None:
        """Run ``gathered`` once for the parked requests; each member goes on with its answer
        (an exception as an answer is raised in its member), or all with the error it raised."""
        try:
            answers = gathered([request for _, request in parked])
            if len(answers) != len(parked):
                raise RuntimeError(
                    f"{gathered.__qualname__} answered {len(answers)} of {len(parked)} requests"
                )
        except BaseException as error:
            for member, _ in parked:
                member.throw(error)
            return
        for (member, _), answer in zip(parked, answers, strict=True):
            if isinstance(answer, BaseException):
                member.throw(answer)
            else:
                member.switch(answer)

    def park(self, member: _Member, gathered: Gathered, request: Any) -> Any:
        self._parked.setdefault(gathered, []).append((member, request))
        return member.parent.switch()


def idle(connection: psycopg.Connection[Any]) -> bool:
    """No transaction open on ``connection`` (read from libpq's state, without building the
    ConnectionInfo that ``connection.info`` makes at each use: a slice asks at each boundary)."""
    return connection.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE


def _as_lent(connection: psycopg.Connection[Any]) -> None:
    """Before a group's connection goes back: a transaction an attempt left open rolled back,
    and out of autocommit mode, as it was lent (a connection that cannot be is closed)."""
    if connection.closed:
        return
    try:
        if not idle(connection):
            connection.rollback()
        connection.autocommit = False
    except psycopg.Error:
        connection.close()


class HeldConnection:
    """A pooled connection a worker thread keeps from one group to the next, so that a group
    does not pay the pool's check (a round trip) for it: given back to the pool when the thread
    is about to wait for work or to run a job alone, and whenever a group left it in a
    transaction or closed."""

    def __init__(
        self, connect: Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
    ) -> None:
        self._connect = connect
        self._held: ExitStack | None = None
        self._connection: psycopg.Connection[Any] | None = None

    @contextmanager
    def lend(self) -> Iterator[psycopg.Connection[Any]]:
        """The held connection (taken from the pool if none is held) for one group."""
        if self._connection is None or self._connection.closed:
            self.give_back()
            held = ExitStack()
            self._connection = held.enter_context(self._connect())
            self._held = held
        try:
            yield self._connection
        finally:
            if self._connection.closed or not idle(self._connection):
                self.give_back()

    def give_back(self) -> None:
        held, self._held, self._connection = self._held, None, None
        if held is not None:
            held.close()


def in_group() -> bool:
    """True when the caller runs as an attempt of a group."""
    return isinstance(getcurrent(), _Member)


def gather(gathered: Callable[[list[Request]], list[Answer]], request: Request) -> Answer:
    """``gathered([request])[0]``, run together with the requests the other attempts of the group
    park on the same ``gathered`` (the function object is the key: make it a module-level one).

    ``gathered`` takes the requests in the order they parked and returns one answer for each,
    in that order; an answer that is an exception is raised in its own attempt only, and an
    exception ``gathered`` raises is raised in every attempt that parked on it.
    """
    current = getcurrent()
    if not isinstance(current, _Member):
        answer = gathered([request])[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer
    parked: Answer = current.group.park(current, gathered, request)
    return parked


class GroupSize:
    """How many attempts of a batching task a worker thread runs together: as many as fit in
    ``target_seconds`` (the worker's ``group_target_seconds``) by a moving average of what one
    attempt of a group costs, at least 1 and at most the task's ``batch``. A group's attempts
    wait for one another, so short attempts are grouped and long ones run one by one, as if the
    task did not batch."""

    SMOOTHING = 0.2

    def __init__(self, batch: int, target_seconds: float = DEFAULT_GROUP_TARGET_SECONDS) -> None:
        self.batch = batch
        self.target_seconds = target_seconds
        self.per_attempt: float | None = None  # seconds; None until a group ran

    def observe(self, seconds: float, attempts: int) -> None:
        # Worker threads race here; under the GIL a lost update only delays the average.
        cost = seconds / attempts
        previous = self.per_attempt
        self.per_attempt = (
            cost if previous is None else previous + self.SMOOTHING * (cost - previous)
        )

    def size(self) -> int:
        if self.batch == 1 or self.per_attempt is None:
            return 1
        fits = math.floor(self.target_seconds / max(self.per_attempt, 1e-6))
        return max(1, min(self.batch, fits))
