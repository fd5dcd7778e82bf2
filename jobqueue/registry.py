"""The task registry: which function runs a task name, on which queue, with which retry policy."""

import importlib
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, overload

from jobqueue.backoff import RetryPolicy
from jobqueue.errors import InvalidPayload, UnknownTask

DEFAULT_QUEUE = "default"
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600  # an attempt's timeout, by decorator or at enqueue
MAX_BATCH = 1000  # attempts of one task a worker thread may run together

TaskFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    function: TaskFunction
    queue: str
    retry: RetryPolicy
    pass_context: bool
    timeout: float | None = None  # seconds an attempt may run; None: the worker's default
    batch: int = 1  # attempts a worker thread runs together (jobqueue.cooperative); 1: alone
    # The function's keyword parameters, read once (inspect.signature took a third of a no-op
    # attempt's time when it ran per attempt): all of them, and those without a default.
    # None when only binding can tell (*args, **kwargs, positional-only parameters).
    _names: frozenset[str] | None = field(init=False, repr=False, compare=False)
    _required: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names: set[str] | None = set()
        required = set()
        try:
            parameters = list(inspect.signature(self.function).parameters.values())
        except (TypeError, ValueError):  # not introspectable (some builtins): checked per call
            parameters, names = [], None
        if self.pass_context:  # the context comes first, by position
            first = parameters.pop(0) if parameters else None
            if first is None or first.kind not in (
                first.POSITIONAL_ONLY,
                first.POSITIONAL_OR_KEYWORD,
            ):
                names = None
        for parameter in parameters:
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                if names is not None:
                    names.add(parameter.name)
                if parameter.default is parameter.empty:
                    required.add(parameter.name)
            else:  # *args, **kwargs or a positional-only parameter
                names = None
        object.__setattr__(self, "_names", None if names is None else frozenset(names))
        object.__setattr__(self, "_required", frozenset(required))

    def call_arguments(self, payload: Any) -> Mapping[str, Any]:
        """Check that ``payload`` fits the function's signature; return it as keyword arguments.

        A payload that does not fit can never succeed, so it raises :class:`InvalidPayload`
        (a permanent error) instead of failing attempt after attempt.
        """
        if not isinstance(payload, dict):
            raise InvalidPayload(
                f"task {self.name!r} takes a JSON object as payload, not {type(payload).__name__}"
            )
        if self._names is not None and self._required <= payload.keys() <= self._names:
            return payload
        # A payload that may not fit: binding it says whether it does, and if not, why.
        signature = inspect.signature(self.function)
        try:
            if self.pass_context:
                signature.bind(None, **payload)
            else:
                signature.bind(**payload)
        except TypeError as error:
            raise InvalidPayload(f"payload does not fit task {self.name!r}: {error}") from None
        return payload


class TaskRegistry:
    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    @overload
    def task(self, name: TaskFunction, /) -> TaskFunction: ...

    @overload
    def task(
        self,
        name: str | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        retry: RetryPolicy | None = None,
        pass_context: bool = False,
        timeout: float | None = None,
        batch: int = 1,
    ) -> Callable[[TaskFunction], TaskFunction]: ...

    def task(
        self,
        name: str | TaskFunction | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        retry: RetryPolicy | None = None,
        pass_context: bool = False,
        timeout: float | None = None,
        batch: int = 1,
    ) -> TaskFunction | Callable[[TaskFunction], TaskFunction]:
        """Register the decorated function as a task: ``@task``, ``@task("name")`` or
        ``@task(queue=..., retry=...)``; the task's name defaults to the function's.

        The payload's keys become the function's keyword arguments. With ``pass_context`` the
        function also gets a :class:`jobqueue.execution.JobContext` as its first argument.
        ``timeout`` (seconds) bounds each attempt, unless the job was enqueued with its own;
        without either, the worker's ``timeout_seconds`` setting applies. With ``batch`` above 1,
        a worker thread runs up to that many of the task's attempts together, each in a greenlet
        of its own, and the task's :func:`jobqueue.cooperative.gather` calls run together.
        """
        if callable(name):  # used bare, as @task
            return self.task()(name)
        if timeout is not None and (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT_SECONDS
        ):
            raise ValueError(
                f"timeout must be more than 0 and at most {MAX_TIMEOUT_SECONDS:,} seconds, "
                f"not {timeout!r}"
            )

        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise ValueError(f"batch must be a whole number from 1 to {MAX_BATCH}, not {batch!r}")

        def register(function: TaskFunction) -> TaskFunction:
            task_name = name or function.__name__
            existing = self._tasks.get(task_name)
            if existing is not None and existing.function is not function:
                raise ValueError(f"task {task_name!r} is already registered")
            self._tasks[task_name] = Task(
                name=task_name,
                function=function,
                queue=queue,
                retry=retry or RetryPolicy(),
                pass_context=pass_context,
                timeout=None if timeout is None else float(timeout),
                batch=batch,
            )
            return function

        return register

    def get(self, name: str) -> Task | None:
        return self._tasks.get(name)

    def require(self, name: str) -> Task:
        task = self._tasks.get(name)
        if task is None:
            known = ", ".join(sorted(self._tasks)) or "none"
            raise UnknownTask(f"unknown task {name!r}; registered tasks are: {known}")
        return task

    def __contains__(self, name: object) -> bool:
        return name in self._tasks

    def __iter__(self) -> Iterator[Task]:
        return iter(sorted(self._tasks.values(), key=lambda task: task.name))


registry = TaskRegistry()
"""The process-wide registry that ``@task`` fills and the runner reads."""

task = registry.task

BUILTIN_TASK_MODULE = "jobqueue.builtin_tasks"


def import_task_modules(modules: Iterable[str]) -> None:
    """Import the modules whose ``@task`` decorators fill the registry (built-ins always)."""
    for module in (BUILTIN_TASK_MODULE, *modules):
        importlib.import_module(module)
