"""What the domain refuses, as exceptions whose message can be shown to the user as is."""


class DomainError(Exception):
    """A request the domain refuses; nothing was changed."""


class NotFound(DomainError, LookupError):
    """The row does not exist (or is not the caller's to see)."""


class StateConflict(DomainError):
    """The row is no longer in a state that allows the action (answered with 409 over JSON)."""


class InvalidInput(DomainError, ValueError):
    """The input cannot be used, whatever the state."""
