"""Exceptions raised by the engine, and the ones tasks raise to steer their job."""


class JobQueueError(Exception):
    """Base class of the engine's own errors."""


class ConfigurationError(JobQueueError, ValueError):
    """A setting has a value the engine cannot work with; the message names the setting."""


class EnqueueError(JobQueueError, ValueError):
    """A job could not be enqueued because of what the caller passed; nothing was written."""


class PayloadTooLarge(EnqueueError):
    pass


class UnknownTask(JobQueueError, LookupError):
    pass


class OperationRefused(JobQueueError):
    """An operator action does not apply to the job or queue in its current state."""


class JobNotFound(OperationRefused, LookupError):
    pass


class PermanentError(Exception):
    """Raise from a task to send its job to the dead state at once, without retries."""


class InvalidPayload(PermanentError):
    """The task cannot work with the payload it was given; retrying cannot help."""


class TimedOut(Exception):
    """An attempt ran past its timeout (recorded, not raised: the runner cannot stop a thread)."""
