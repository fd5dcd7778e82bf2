"""Durable workflows on the job engine: checkpointed steps, durable sleeps and waits.

Knows nothing of Flask or HR. See docs/howto/write-a-workflow.md and
docs/discussions/workflows.md.
"""

from workflows.engine import (
    Started,
    cancel_execution,
    resume_execution,
    send_event,
    start_workflow,
)
from workflows.errors import (
    ActionRefused,
    CodeChanged,
    EventRefused,
    StartError,
    StepFailed,
    UnknownWorkflow,
    WorkflowError,
)
from workflows.registry import WorkflowRegistry, registry, workflow
from workflows.runtime import QUEUE, SLICE_TASK, Event, WorkflowContext

__all__ = [
    "QUEUE",
    "SLICE_TASK",
    "ActionRefused",
    "CodeChanged",
    "Event",
    "EventRefused",
    "StartError",
    "Started",
    "StepFailed",
    "UnknownWorkflow",
    "WorkflowContext",
    "WorkflowError",
    "WorkflowRegistry",
    "cancel_execution",
    "registry",
    "resume_execution",
    "send_event",
    "start_workflow",
    "workflow",
]
