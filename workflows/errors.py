"""Exceptions of the workflow engine, and the ones workflow code sees."""

from jobqueue.errors import JobQueueError


class WorkflowError(JobQueueError):
    """Base class of the workflow engine's own errors."""


class StartError(WorkflowError, ValueError):
    """A workflow could not be started because of what the caller passed; nothing was written."""


class ActionRefused(WorkflowError):
    """An act on an execution (an event, a cancel, a resume) does not apply; nothing changed.

    The message is a sentence an operator can read: it says why.
    """


class EventRefused(ActionRefused):
    pass


class StepFailed(WorkflowError):
    """A step failed for good (its retries spent); raised into the workflow code, and again on
    every replay, so the workflow may catch it and take another path."""

    def __init__(self, step_id: int, name: str, error: str) -> None:
        super().__init__(f"step {step_id} ({name!r}) failed: {error}")
        self.step_id = step_id
        self.name = name
        self.error = error


class CodeChanged(WorkflowError):
    """A replay called a different step where the execution recorded another."""


class UnknownWorkflow(WorkflowError, LookupError):
    """No workflow of that name is registered in this process (the slice is retried later)."""
