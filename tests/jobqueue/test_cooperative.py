"""Cooperative groups (jobqueue.cooperative): attempts that run together in one thread, each in
its own greenlet, whose gathered calls run once for all the requests parked on them. Pure logic:
the gathered functions here are plain Python, and no attempt uses the group's connection."""

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

from jobqueue.cooperative import Group, GroupSize, HeldConnection, gather, in_group
from jobqueue.registry import TaskRegistry


@contextmanager
def no_connection() -> Iterator[Any]:
    raise AssertionError("no attempt here uses the group's connection")
    yield


class Recorder:
    """Gathered functions that record each call's requests."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []

    def times_ten(self, requests: list[int]) -> list[int]:
        self.calls.append(("times_ten", list(requests)))
        return [request * 10 for request in requests]

    def plus_one(self, requests: list[int]) -> list[int]:
        self.calls.append(("plus_one", list(requests)))
        return [request + 1 for request in requests]


def test_parked_requests_run_as_one_call_and_each_attempt_gets_its_own_answer() -> None:
    """kills: gather-runs-alone"""
    recorder = Recorder()

    def attempt(n: int) -> tuple[int, int]:
        first = gather(recorder.times_ten, n)
        second = gather(recorder.plus_one, first)
        return first, second

    results = Group(no_connection).run([lambda n=n: attempt(n) for n in (1, 2, 3)])
    assert results == [(10, 11), (20, 21), (30, 31)]
    assert recorder.calls == [("times_ten", [1, 2, 3]), ("plus_one", [10, 20, 30])]


def test_attempts_that_park_on_different_calls_and_end_early_all_finish() -> None:
    recorder = Recorder()

    def attempt(n: int) -> list[int]:
        seen = []
        for _ in range(n):  # attempt n parks n times: the group's rounds shrink as they end
            seen.append(gather(recorder.times_ten if n % 2 else recorder.plus_one, n))
        return seen

    results = Group(no_connection).run([lambda n=n: attempt(n) for n in range(4)])
    assert results == [[], [10], [3, 3], [30, 30, 30]]
    assert recorder.calls[0] == ("times_ten", [1, 3])  # those parked on it in the first round
    assert sum(len(requests) for _, requests in recorder.calls) == 1 + 2 + 3


def test_an_exception_answered_for_one_request_is_raised_in_that_attempt_only() -> None:
    def refuse_odd(requests: list[int]) -> list[int | Exception]:
        return [ValueError(f"odd {n}") if n % 2 else n for n in requests]

    def attempt(n: int) -> str:
        try:
            return f"ok {gather(refuse_odd, n)}"
        except ValueError as error:
            return f"refused: {error}"

    results = Group(no_connection).run([lambda n=n: attempt(n) for n in range(4)])
    assert results == ["ok 0", "refused: odd 1", "ok 2", "refused: odd 3"]


def test_an_error_of_the_gathered_call_is_raised_in_every_attempt_parked_on_it() -> None:
    def broken(requests: list[int]) -> list[int]:
        raise ConnectionError(f"gone with {len(requests)} requests")

    def short(requests: list[int]) -> list[int]:
        return requests[:1]

    def attempt(n: int, call: Callable[[list[int]], list[int]]) -> str:
        try:
            return str(gather(call, n))
        except Exception as error:
            return f"{type(error).__name__}: {error}"

    assert (
        Group(no_connection).run([lambda n=n: attempt(n, broken) for n in range(3)])
        == ["ConnectionError: gone with 3 requests"] * 3
    )
    answered = Group(no_connection).run([lambda n=n: attempt(n, short) for n in range(2)])
    assert [answer.rsplit(".", 1)[-1] for answer in answered] == [
        "short answered 1 of 2 requests"
    ] * 2


def test_outside_a_group_gather_runs_the_call_at_once() -> None:
    recorder = Recorder()
    assert not in_group()
    assert gather(recorder.times_ten, 4) == 40
    assert recorder.calls == [("times_ten", [4])]

    def refuse(requests: list[int]) -> list[Exception]:
        return [LookupError("no")]

    with pytest.raises(LookupError):
        gather(refuse, 1)
    assert Group(no_connection).run([in_group]) == [True]


def test_each_attempt_has_its_own_context_variables() -> None:
    """An attempt's span is current only in its own greenlet: context variables do not leak
    between the attempts of a group, nor out of it."""
    current: contextvars.ContextVar[int | None] = contextvars.ContextVar("current", default=None)
    recorder = Recorder()

    def attempt(n: int) -> tuple[int | None, int | None]:
        before = current.get()
        current.set(n)
        gather(recorder.times_ten, n)  # the others run and set theirs meanwhile
        return before, current.get()

    results = Group(no_connection).run([lambda n=n: attempt(n) for n in (1, 2, 3)])
    assert results == [(None, 1), (None, 2), (None, 3)]
    assert current.get() is None


def test_a_call_that_raises_is_raised_by_run_once_the_others_ended() -> None:
    ended = []

    def good(n: int) -> int:
        gather(Recorder().times_ten, n)
        ended.append(n)
        return n

    def bad() -> int:
        raise KeyError("bad")

    with pytest.raises(KeyError):
        Group(no_connection).run([lambda: good(1), bad, lambda: good(2)])
    assert ended == [1, 2]


def test_group_size_grows_for_short_attempts_and_falls_to_one_for_long_ones() -> None:
    """kills: group-size-ignores-cost"""
    size = GroupSize(batch=32)
    assert size.size() == 1  # nothing measured yet: one at a time
    size.observe(0.004, 4)  # 1 ms an attempt: 50 fit in 50 ms, the batch caps it
    assert size.size() == 32
    for _ in range(30):
        size.observe(0.2, 1)  # attempts of 200 ms: each alone
    assert size.size() == 1
    for _ in range(60):
        size.observe(0.04, 10)  # 4 ms an attempt: 12 fit
    assert size.size() == 12
    assert GroupSize(batch=1).size() == 1


def test_a_longer_group_target_groups_attempts_the_default_runs_alone() -> None:
    """A worker's group_target_seconds: attempts of 100 ms run alone under the default 50 ms,
    ten at a time under 1 s.
    kills: group-size-ignores-target"""
    default, longer = GroupSize(batch=28), GroupSize(batch=28, target_seconds=1.0)
    for size in (default, longer):
        size.observe(0.1, 1)
    assert (default.size(), longer.size()) == (1, 10)


@pytest.mark.parametrize("batch", [0, 1001, True, 2.0, "4"])
def test_a_tasks_batch_out_of_bounds_is_refused_with_a_sentence(batch: Any) -> None:
    with pytest.raises(ValueError, match=r"^batch must be a whole number from 1 to 1000, not "):
        TaskRegistry().task("grouped", batch=batch)


def test_a_tasks_batch_is_kept_per_task() -> None:
    tasks = TaskRegistry()
    tasks.task("grouped", queue="q", batch=8)(lambda: None)
    tasks.task("alone", queue="q")(lambda: None)
    assert (tasks.require("grouped").batch, tasks.require("alone").batch) == (8, 1)


class Pool:
    """Lends real connections, as the runner's pool does, and counts what it lent."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lent: list[Any] = []
        self.returned = 0

    @contextmanager
    def connection(self) -> Iterator[Any]:
        with psycopg.connect(self.url) as connection:
            self.lent.append(connection)
            yield connection
        self.returned += 1


def test_a_thread_keeps_its_groups_connection_from_one_group_to_the_next(
    database_url: str,
) -> None:
    """kills: held-connection-never-kept"""
    pool = Pool(database_url)
    held = HeldConnection(pool.connection)

    def backend(group: Group) -> int:
        with group.connection() as connection:
            row = connection.execute("SELECT pg_backend_pid()").fetchone()
        return int(row[0])

    first = Group(held.lend)
    pids = first.run([lambda: backend(first)] * 3)
    second = Group(held.lend)
    pids += second.run([lambda: backend(second)])
    assert len(set(pids)) == 1 and (len(pool.lent), pool.returned) == (1, 0)
    held.give_back()
    assert pool.returned == 1


def test_a_transaction_an_attempt_left_open_is_rolled_back_before_the_connection_goes_on(
    database_url: str,
) -> None:
    """A group's connection outlives the group (kept for the thread's next group, or back in
    the pool): what an attempt left uncommitted there must not commit with whatever comes next.
    kills: group-leaves-transaction-open"""
    pool = Pool(database_url)
    held = HeldConnection(pool.connection)
    with psycopg.connect(database_url, autocommit=True) as other:
        other.execute("CREATE TABLE left_open (n int)")

        def leave_open(group: Group) -> None:
            with group.connection() as connection:
                connection.execute("BEGIN")
                connection.execute("INSERT INTO left_open VALUES (1)")

        group = Group(held.lend)
        group.run([lambda: leave_open(group)])
        (connection,) = pool.lent
        assert connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert connection.autocommit is False  # as the pool lent it
        held.give_back()  # the pool's block ends: it would commit an open transaction
        assert other.execute("SELECT count(*) FROM left_open").fetchone() == (0,)
        other.execute("DROP TABLE left_open")
