"""Retry policy: exponential backoff with full jitter, capped."""

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

DEFAULT_MAX_ATTEMPTS = 5
MAX_ATTEMPTS = 1_000_000  # far below int4, so a release's extra attempt cannot overflow it
MAX_DELAY_SECONDS = 10 * 365 * 24 * 3600  # ten years: what a job may wait, as a delay or retry


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
        if not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValueError(f"max_attempts must be between 1 and {MAX_ATTEMPTS:,}")
        for name in ("base_seconds", "cap_seconds"):
            if not 0 <= getattr(self, name) <= MAX_DELAY_SECONDS:  # also refuses nan and inf
                raise ValueError(f"{name} must be between 0 and {MAX_DELAY_SECONDS:,} seconds")
        if not 1 <= self.factor <= 1000:
            raise ValueError("factor must be between 1 and 1000")

    def ceiling(self, attempt: int) -> float:
        """The longest delay after failed attempt number ``attempt`` (1-based)."""
        exponent = max(attempt - 1, 0)
        if self.base_seconds == 0 or self.cap_seconds == 0:
            return 0.0
        # Compare in the log domain first: factor ** exponent overflows a float long before
        # an attempt number runs out (factor 10 at attempt 310).
        if self.factor > 1 and exponent * math.log(self.factor) >= math.log(
            self.cap_seconds / self.base_seconds
        ):
            return self.cap_seconds
        return min(self.cap_seconds, self.base_seconds * self.factor**exponent)

    def delay(self, attempt: int) -> float:
        """A jittered delay in seconds after failed attempt number ``attempt``."""
        return self.ceiling(attempt) * self.rng()
