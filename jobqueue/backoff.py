"""Retry policy: exponential backoff with full jitter, capped."""

import random
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a failed attempt waits before the next one.

    The ceiling after attempt ``n`` is ``min(cap, base * factor ** (n - 1))``; the actual delay is
    drawn uniformly from ``[0, ceiling]`` ("full jitter"), which spreads a burst of failures out
    instead of retrying them in lockstep.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_seconds: float = 10.0
    factor: float = 2.0
    cap_seconds: float = 300.0
    rng: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_seconds < 0 or self.cap_seconds < 0:
            raise ValueError("base_seconds and cap_seconds must not be negative")
        if self.factor < 1:
            raise ValueError("factor must be at least 1")

    def ceiling(self, attempt: int) -> float:
        """The longest delay after failed attempt number ``attempt`` (1-based)."""
        exponent = max(attempt - 1, 0)
        # Compare in the exponent domain first so a large attempt cannot overflow a float.
        if self.base_seconds == 0:
            return 0.0
        if self.factor > 1 and exponent > 1024:
            return self.cap_seconds
        return min(self.cap_seconds, self.base_seconds * self.factor**exponent)

    def delay(self, attempt: int) -> float:
        """A jittered delay in seconds after failed attempt number ``attempt``."""
        return self.ceiling(attempt) * self.rng()
