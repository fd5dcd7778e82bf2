"""The vocabularies of the job state machine: job states and attempt outcomes.

Each enum is mirrored by one CHECK constraint (see models/jobs.py) and drawn in
docs/reference/job-states.md.
"""

from enum import StrEnum


class JobState(StrEnum):
    AVAILABLE = "available"  # waiting; visible once available_at <= now()
    RUNNING = "running"  # claimed by a worker, under a lease
    SUCCEEDED = "succeeded"
    DEAD = "dead"  # attempts exhausted or a permanent error: the dead-letter state
    CANCELLED = "cancelled"  # withdrawn by an operator before it ran, or stopped when asked


FINISHED_STATES = frozenset({JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED})


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # the task raised; the job retries or, when exhausted or permanent, dies
    LEASE_EXPIRED = "lease_expired"  # the worker stopped heartbeating (crash, kill -9, partition)
    RELEASED = "released"  # given back at shutdown; not counted against the attempt budget
    TIMED_OUT = "timed_out"  # ran past its timeout; retries like a failure, its thread abandoned
    CANCELLED = "cancelled"  # the task stopped when asked to (ctx.cancel_requested); no retry


class WorkerState(StrEnum):
    RUNNING = "running"
    DRAINING = "draining"  # asked to stop: finishing in-flight jobs, claiming no more
    STOPPED = "stopped"
    LOST = "lost"  # stopped heartbeating without unregistering (killed, crashed, cut off)
