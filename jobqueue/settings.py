"""Typed runner settings with named defaults, validated once at start."""

from collections.abc import Mapping
from dataclasses import dataclass, field

from jobqueue.enqueue import QUEUE_NAME

DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_HEARTBEAT_SECONDS = 10.0
DEFAULT_POLL_SECONDS = 1.0
DEFAULT_GRACE_SECONDS = 25.0
DEFAULT_PREFETCH = 10
DEFAULT_SWEEP_SECONDS = 5.0
DEFAULT_PRUNE_SECONDS = 300.0
DEFAULT_KEEP_SUCCEEDED_SECONDS = 24 * 3600.0
DEFAULT_KEEP_DEAD_SECONDS = 14 * 24 * 3600.0
DEFAULT_CONNECT_WAIT_SECONDS = 30.0


class SettingsError(ValueError):
    """A setting has a value the runner cannot start with; the message names the setting."""


@dataclass(frozen=True)
class RunnerSettings:
    database_url: str
    queues: Mapping[str, int]  # queue name -> threads running its jobs
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    poll_seconds: float = DEFAULT_POLL_SECONDS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    prefetch: int = DEFAULT_PREFETCH
    sweep_seconds: float = DEFAULT_SWEEP_SECONDS
    prune_seconds: float = DEFAULT_PRUNE_SECONDS
    keep_succeeded_seconds: float = DEFAULT_KEEP_SUCCEEDED_SECONDS
    keep_dead_seconds: float = DEFAULT_KEEP_DEAD_SECONDS
    maintenance: bool = True  # take part in the leader election for sweeping and pruning
    connect_wait_seconds: float = DEFAULT_CONNECT_WAIT_SECONDS  # at start, for the database
    task_modules: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.database_url:
            raise SettingsError("database_url is empty: set DATABASE_URL")
        if not self.queues:
            raise SettingsError("queues is empty: name at least one queue, e.g. default=4")
        for name, threads in self.queues.items():
            if not QUEUE_NAME.match(name):
                raise SettingsError(
                    f"queues: {name!r} is not a valid queue name "
                    "(1-63 lowercase letters, digits, '_', '.' or '-')"
                )
            if not 1 <= threads <= 1000:
                raise SettingsError(f"queues: {name} needs 1 to 1000 threads, not {threads}")
        for name in (
            "lease_seconds",
            "heartbeat_seconds",
            "poll_seconds",
            "sweep_seconds",
            "prune_seconds",
            "keep_succeeded_seconds",
            "keep_dead_seconds",
        ):
            if not getattr(self, name) > 0:
                raise SettingsError(f"{name} must be more than 0, not {getattr(self, name)}")
        if self.connect_wait_seconds < 0:
            raise SettingsError(
                f"connect_wait_seconds must be 0 or more, not {self.connect_wait_seconds}"
            )
        if self.grace_seconds < 0:
            raise SettingsError(f"grace_seconds must be 0 or more, not {self.grace_seconds}")
        if self.prefetch < 0:
            raise SettingsError(f"prefetch must be 0 or more, not {self.prefetch}")
        if self.heartbeat_seconds * 2 > self.lease_seconds:
            raise SettingsError(
                f"heartbeat_seconds ({self.heartbeat_seconds:g}) must be at most half of "
                f"lease_seconds ({self.lease_seconds:g}) so a lease is renewed before it expires"
            )


def parse_queues(text: str) -> dict[str, int]:
    """Parse ``default=4,notifications=2`` (a bare name means one thread)."""
    queues: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, _, threads = item.partition("=")
        name = name.strip()
        try:
            count = int(threads) if threads else 1
        except ValueError:
            raise SettingsError(
                f"queues: {item!r} should be NAME=THREADS with a whole number, e.g. default=4"
            ) from None
        if name in queues:
            raise SettingsError(f"queues: {name!r} is listed twice")
        queues[name] = count
    return queues
