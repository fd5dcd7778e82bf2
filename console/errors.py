"""What an operator action can answer instead of doing it: nothing is changed in either case."""


class ConsoleError(Exception):
    pass


class NotFound(ConsoleError, LookupError):
    """The job, queue, worker or failure group does not exist (for this user)."""


class ActionRefused(ConsoleError):
    """The target is not in a state the action applies to; the message says why."""
