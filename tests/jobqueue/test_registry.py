"""Registering tasks."""

import pytest

from jobqueue import RetryPolicy, TaskRegistry, UnknownTask
from jobqueue.errors import InvalidPayload


def test_task_registers_bare_named_and_with_options() -> None:
    tasks = TaskRegistry()

    @tasks.task
    def plain() -> str:
        return "plain"

    @tasks.task("renamed", queue="mail", retry=RetryPolicy(max_attempts=2))
    def original() -> str:
        return "original"

    assert plain() == "plain"  # the decorator gives back the function itself
    assert tasks.require("plain").queue == "default"
    assert tasks.require("renamed").function is original
    assert (tasks.require("renamed").queue, tasks.require("renamed").retry.max_attempts) == (
        "mail",
        2,
    )
    assert [task.name for task in tasks] == ["plain", "renamed"]


def test_a_name_cannot_be_taken_twice() -> None:
    tasks = TaskRegistry()
    tasks.task("job")(lambda: None)
    with pytest.raises(ValueError, match="already registered"):
        tasks.task("job")(lambda: None)


def test_unknown_task_names_the_known_ones() -> None:
    tasks = TaskRegistry()
    tasks.task("alpha")(lambda: None)
    with pytest.raises(UnknownTask, match="unknown task 'beta'; registered tasks are: alpha"):
        tasks.require("beta")


def test_payloads_are_checked_against_the_signature_read_at_registration() -> None:
    """kills: payload-fast-path-takes-unknown-keys"""
    tasks = TaskRegistry()

    @tasks.task
    def send(to: str, *, subject: str = "") -> None: ...

    @tasks.task(pass_context=True)
    def with_context(ctx: object, item: int) -> None: ...

    @tasks.task
    def anything(**fields: object) -> None: ...

    @tasks.task
    def positional(item: int, /) -> None: ...

    def fits(name: str, payload: dict[str, object]) -> bool | str:
        try:
            tasks.require(name).call_arguments(payload)
        except InvalidPayload as error:
            return str(error).split(": ", 1)[1]
        return True

    assert fits("send", {"to": "a"}) is True
    assert fits("send", {"to": "a", "subject": "b"}) is True
    assert fits("send", {}) == "missing a required argument: 'to'"
    assert fits("send", {"to": "a", "cc": "b"}) == "got an unexpected keyword argument 'cc'"
    assert fits("with_context", {"item": 1}) is True
    assert fits("with_context", {"item": 1, "ctx": 2}) == "multiple values for argument 'ctx'"
    assert fits("anything", {"x": 1}) is True
    assert fits("positional", {"item": 1}) == (
        "'item' parameter is positional only, but was passed as a keyword"
    )
