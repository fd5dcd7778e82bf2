"""Pauta's job engine: a PostgreSQL job queue with transactional enqueue, one-statement claims,
fenced results, leases and a dead-letter state. It knows nothing of Flask or HR.
"""

from jobqueue.backoff import RetryPolicy
from jobqueue.cancel import cancel
from jobqueue.enqueue import JobRequest, enqueue, enqueue_many
from jobqueue.errors import (
    EnqueueError,
    InvalidPayload,
    JobNotFound,
    OperationRefused,
    PayloadTooLarge,
    PermanentError,
    UnknownTask,
)
from jobqueue.execution import JobContext
from jobqueue.registry import TaskRegistry, registry, task
from jobqueue.states import AttemptOutcome, JobState
from jobqueue.store import JobStore

__all__ = [
    "AttemptOutcome",
    "EnqueueError",
    "InvalidPayload",
    "JobContext",
    "JobNotFound",
    "JobRequest",
    "JobState",
    "JobStore",
    "OperationRefused",
    "PayloadTooLarge",
    "PermanentError",
    "RetryPolicy",
    "TaskRegistry",
    "UnknownTask",
    "cancel",
    "enqueue",
    "enqueue_many",
    "registry",
    "task",
]
