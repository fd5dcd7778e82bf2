"""Registering tasks."""

import pytest

from jobqueue import RetryPolicy, TaskRegistry, UnknownTask


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
