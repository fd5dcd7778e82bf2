"""The workflow registry: which function runs a workflow name, at which version."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from workflows.errors import UnknownWorkflow

WorkflowFunction = Callable[..., Any]


@dataclass(frozen=True, slots=True)
class Workflow:
    name: str
    function: WorkflowFunction
    version: int
    relaxed_durability: bool = False


class WorkflowRegistry:
    def __init__(self) -> None:
        self._workflows: dict[str, Workflow] = {}

    def workflow(
        self, name: str | None = None, *, version: int = 1, relaxed_durability: bool = False
    ) -> Callable[[WorkflowFunction], WorkflowFunction]:
        """Register the decorated function as a workflow: ``@workflow("name", version=2)``.

        The function takes a :class:`workflows.runtime.WorkflowContext` first, then the
        execution's input as keyword arguments; what it returns (JSON) is the execution's output.
        ``relaxed_durability=True`` (opt-in) runs its slices with ``synchronous_commit = off``:
        a checkpoint's commit does not wait for its WAL flush, and a crash of PostgreSQL (not of
        a worker) can lose the last fraction of a second of them, whose steps then run again.
        """

        def register(function: WorkflowFunction) -> WorkflowFunction:
            workflow_name = name or function.__name__
            existing = self._workflows.get(workflow_name)
            if existing is not None and existing.function is not function:
                raise ValueError(f"workflow {workflow_name!r} is already registered")
            self._workflows[workflow_name] = Workflow(
                workflow_name, function, version, relaxed_durability
            )
            return function

        return register

    def get(self, name: str) -> Workflow | None:
        return self._workflows.get(name)

    def require(self, name: str) -> Workflow:
        found = self._workflows.get(name)
        if found is None:
            known = ", ".join(sorted(self._workflows)) or "none"
            raise UnknownWorkflow(f"no workflow named {name!r} here; registered: {known}")
        return found

    def replace(
        self,
        name: str,
        function: WorkflowFunction,
        version: int = 1,
        relaxed_durability: bool = False,
    ) -> None:
        """Register ``function`` under ``name`` even if another holds it (a new deploy in tests)."""
        self._workflows[name] = Workflow(name, function, version, relaxed_durability)

    def __iter__(self) -> Iterator[Workflow]:
        return iter(sorted(self._workflows.values(), key=lambda found: found.name))


registry = WorkflowRegistry()
"""The process-wide registry that ``@workflow`` fills and the slice task reads."""

workflow = registry.workflow
