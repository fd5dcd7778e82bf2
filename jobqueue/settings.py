"""Worker settings: typed, with named defaults, read from pauta.toml and the command line (which
wins), and validated once at start. docs/reference/settings.md describes each one."""

import argparse
import gc
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from jobqueue.enqueue import QUEUE_NAME
from jobqueue.errors import ConfigurationError
from jobqueue.text import DEFAULT_ERROR_MAX_BYTES, DEFAULT_TRACEBACK_MAX_BYTES, MINIMUM_MAX_BYTES

DEFAULT_LEASE_SECONDS = 30.0
DEFAULT_HEARTBEAT_SECONDS = 10.0
DEFAULT_POLL_SECONDS = 1.0
DEFAULT_GRACE_SECONDS = 25.0
DEFAULT_PREFETCH = 500  # at most; see jobqueue.runner.Prefetch
DEFAULT_PREFETCH_BYTES = 8 * 1024 * 1024  # of payloads' JSON, at most; the same
DEFAULT_SWEEP_SECONDS = 5.0
DEFAULT_PRUNE_SECONDS = 300.0
DEFAULT_VACUUM_SECONDS = 30.0  # only where autovacuum does not vacuum the churning tables
DEFAULT_VACUUM_DEAD_ROWS = 50_000  # dead rows in jobs_live past which the leader VACUUMs it
DEFAULT_KEEP_SUCCEEDED_SECONDS = 24 * 3600.0
DEFAULT_KEEP_DEAD_SECONDS = 14 * 24 * 3600.0
DEFAULT_KEEP_STATS_SECONDS = 30 * 24 * 3600.0
# One partition of finished jobs (and of attempts) per hour: with a day's retention, a day's
# history in 24 partitions, each dropped at most an hour after all it holds expired.
DEFAULT_HISTORY_PARTITION_SECONDS = 3600.0
DEFAULT_LEADER_LEASE_SECONDS = 30.0
DEFAULT_DEPTH_SAMPLE_SECONDS = 60.0
DEFAULT_LOST_AFTER_SECONDS = 60.0
DEFAULT_CONNECT_WAIT_SECONDS = 30.0
DEFAULT_RESTART_BACKOFF_MAX_SECONDS = 30.0
DEFAULT_TIMEOUT_SECONDS = 15 * 60.0  # an attempt's, unless its task or its job says otherwise
# The interpreter's first collector threshold in a worker process (Python's own is 700): a job or
# a workflow slice allocates dozens of objects, so at 700 the collector ran every few of them, up
# to 5% of a busy worker's CPU and part of its step latency's tail (docs/benchmarks.md, 2026-12-03).
DEFAULT_GC_THRESHOLD = 50_000
# How long a group of a batching task's attempts may take, by the moving average of what one
# attempt of a group costs (jobqueue.cooperative.GroupSize): its attempts wait for one another.
DEFAULT_GROUP_TARGET_SECONDS = 0.05
BOOLEANS = {"true": True, "false": False, "yes": True, "no": False, "on": True, "off": False}
POOLERS = ("none", "transaction")  # what stands between the worker and the server
PSYCOPG_PREPARE_THRESHOLD = 5  # psycopg's own default: prepare a query at its fifth run
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS = ("text", "json")


class SettingsError(ConfigurationError):
    """A setting has a value the worker cannot start with; the message names the setting."""


@dataclass(frozen=True)
class WorkerSettings:
    database_url: str
    queues: Mapping[str, int]  # queue name -> threads running its jobs
    task_modules: tuple[str, ...] = ()
    lease_seconds: float = DEFAULT_LEASE_SECONDS
    heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS
    poll_seconds: float = DEFAULT_POLL_SECONDS
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    prefetch: int = DEFAULT_PREFETCH
    prefetch_bytes: int = DEFAULT_PREFETCH_BYTES
    sweep_seconds: float = DEFAULT_SWEEP_SECONDS
    prune_seconds: float = DEFAULT_PRUNE_SECONDS
    vacuum_seconds: float = DEFAULT_VACUUM_SECONDS
    vacuum_dead_rows: int = DEFAULT_VACUUM_DEAD_ROWS
    keep_succeeded_seconds: float = DEFAULT_KEEP_SUCCEEDED_SECONDS
    keep_dead_seconds: float = DEFAULT_KEEP_DEAD_SECONDS
    keep_stats_seconds: float = DEFAULT_KEEP_STATS_SECONDS
    history_partition_seconds: float = DEFAULT_HISTORY_PARTITION_SECONDS
    leader_lease_seconds: float = DEFAULT_LEADER_LEASE_SECONDS
    error_max_bytes: int = DEFAULT_ERROR_MAX_BYTES
    traceback_max_bytes: int = DEFAULT_TRACEBACK_MAX_BYTES
    depth_sample_seconds: float = DEFAULT_DEPTH_SAMPLE_SECONDS
    lost_after_seconds: float = DEFAULT_LOST_AFTER_SECONDS
    connect_wait_seconds: float = DEFAULT_CONNECT_WAIT_SECONDS
    restart_backoff_max_seconds: float = DEFAULT_RESTART_BACKOFF_MAX_SECONDS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    fair_tenants: bool = True  # share each claim between the tenants with waiting jobs
    rate_limits: Mapping[str, str] = field(default_factory=dict)  # queue -> "20/s"
    log_level: str = "INFO"
    log_format: str = "text"
    maintenance: bool = True  # run a maintainer: rescue, and a bid for the leader's duties
    # "transaction": DATABASE_URL is a pooler in transaction mode (PgBouncer), which keeps no
    # session: no prepared statements unless told, and LISTEN only on listen_url.
    pooler: str = "none"
    listen_url: str = ""  # where to LISTEN; empty: DATABASE_URL, or polling behind a pooler
    prepare_threshold: str = "auto"  # "auto", "off", or the run after which psycopg prepares
    gc_threshold: int = DEFAULT_GC_THRESHOLD  # the interpreter's first collector threshold
    group_target_seconds: float = DEFAULT_GROUP_TARGET_SECONDS

    def configure_interpreter(self) -> None:
        """What a worker process sets for its whole interpreter, before its runner starts (the
        engine's Runner does not: it may share a process with other code): the collector's
        first threshold."""
        gc.set_threshold(self.gc_threshold, *gc.get_threshold()[1:])

    def __post_init__(self) -> None:
        if not self.database_url:
            raise SettingsError("database_url is empty: set DATABASE_URL")
        if not self.queues:
            raise SettingsError("queues is empty: name at least one queue, e.g. default=4")
        for name, threads in self.queues.items():
            if not isinstance(name, str) or not QUEUE_NAME.match(name):
                raise SettingsError(
                    f"queues: {name!r} is not a valid queue name "
                    "(1-63 lowercase letters, digits, '_', '.' or '-')"
                )
            if (
                isinstance(threads, bool)
                or not isinstance(threads, int)
                or not 1 <= threads <= 1000
            ):
                raise SettingsError(f"queues: {name} needs 1 to 1000 threads, not {threads!r}")
        # before the checks of every number, whose "0 or more" would be wrong here
        if self.gc_threshold < 1:
            raise SettingsError(
                "gc_threshold must be at least 1 (0 would turn the garbage collector off), "
                f"not {self.gc_threshold}"
            )
        for spec in fields(self):
            value = getattr(self, spec.name)
            if spec.type is float and not value > 0 and spec.name not in ZERO_ALLOWED:
                raise SettingsError(f"{spec.name} must be more than 0, not {value:g}")
            if spec.type in (float, int) and value < 0:
                raise SettingsError(f"{spec.name} must be 0 or more, not {value:g}")
            if spec.type is float and not value <= MAX_SECONDS:
                raise SettingsError(
                    f"{spec.name} must be at most {MAX_SECONDS:g} seconds (ten years), "
                    f"not {value:g}"
                )
            if spec.type is int and value > MAX_COUNT:
                raise SettingsError(f"{spec.name} must be at most {MAX_COUNT:,}, not {value:,}")
        if self.heartbeat_seconds * 2 > self.lease_seconds:
            raise SettingsError(
                f"heartbeat_seconds ({self.heartbeat_seconds:g}) must be at most half of "
                f"lease_seconds ({self.lease_seconds:g}) so a lease is renewed before it expires"
            )
        if self.leader_lease_seconds < self.sweep_seconds * 2:
            raise SettingsError(
                f"leader_lease_seconds ({self.leader_lease_seconds:g}) must be at least twice "
                f"sweep_seconds ({self.sweep_seconds:g}) so the leader renews it in time"
            )
        for name in ("error_max_bytes", "traceback_max_bytes"):
            if getattr(self, name) < MINIMUM_MAX_BYTES:
                raise SettingsError(
                    f"{name} must be at least {MINIMUM_MAX_BYTES}, not {getattr(self, name)}"
                )
        if self.lost_after_seconds < self.heartbeat_seconds * 2:
            raise SettingsError(
                f"lost_after_seconds ({self.lost_after_seconds:g}) must be at least twice "
                f"heartbeat_seconds ({self.heartbeat_seconds:g})"
            )
        for queue, rate in self.rate_limits.items():
            if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
                raise SettingsError(f"rate_limits: {queue!r} is not a valid queue name")
            parse_rate(f"rate_limits: {queue}", rate)
        if self.log_level not in LOG_LEVELS:
            raise SettingsError(
                f"log_level must be one of {', '.join(LOG_LEVELS)}, not {self.log_level!r}"
            )
        prepare_after(self.pooler, self.prepare_threshold)  # refuses a bad value of either
        if self.log_format not in LOG_FORMATS:
            raise SettingsError(
                f"log_format must be one of {', '.join(LOG_FORMATS)}, not {self.log_format!r}"
            )

    @property
    def prepare_after(self) -> int | None:
        """psycopg's ``prepare_threshold`` for every connection the worker opens."""
        return prepare_after(self.pooler, self.prepare_threshold)

    @property
    def pooled(self) -> bool:
        """DATABASE_URL is a transaction pooler: no session state may be set on it."""
        return self.pooler == "transaction"

    @property
    def notify_url(self) -> str | None:
        """Where the listener LISTENs, or None: no LISTEN, the fetch loops poll with backoff.
        LISTEN through a transaction pooler would register on whichever server connection
        served that one transaction, and the notifications would go to another client."""
        if self.listen_url:
            return self.listen_url
        return None if self.pooler == "transaction" else self.database_url

    def for_queue(self, queue: str) -> "WorkerSettings":
        """The settings of the child process that serves one queue (it does no maintenance)."""
        return replace(self, queues={queue: self.queues[queue]}, maintenance=False)


def prepare_after(pooler: str, setting: str) -> int | None:
    """psycopg's ``prepare_threshold`` from the pooler and prepare_threshold settings: "auto"
    is psycopg's default on a direct connection and None (never prepare) behind a transaction
    pooler, whose server connections do not keep a client's prepared statements."""
    if pooler not in POOLERS:
        raise SettingsError(f"pooler must be one of {', '.join(POOLERS)}, not {pooler!r}")
    if setting not in ("auto", "off") and not (setting.isdigit() and int(setting) <= MAX_COUNT):
        raise SettingsError(
            f"prepare_threshold must be auto, off or a whole number of runs, not {setting!r}"
        )
    if setting == "off" or (setting == "auto" and pooler == "transaction"):
        return None
    if setting == "auto":
        return PSYCOPG_PREPARE_THRESHOLD
    return int(setting)


ZERO_ALLOWED = frozenset({"grace_seconds", "connect_wait_seconds"})
MAX_SECONDS = 10 * 365 * 24 * 3600.0  # every duration setting; also refuses inf and nan
MAX_COUNT = 10 * 1024 * 1024  # every whole-number setting (prefetch, byte caps)

# Settings read only from the environment (URLs may hold passwords), or not settable at all.
ENVIRONMENT_ONLY = frozenset({"database_url", "listen_url", "maintenance"})
# Environment variables of settings that have a flag too (the flag wins).
ENVIRONMENT = {
    "queues": "PAUTA_QUEUES",
    "task_modules": "PAUTA_TASK_MODULES",
    "pooler": "PAUTA_POOLER",
    "prepare_threshold": "PAUTA_PREPARE_THRESHOLD",
}

# Command-line spellings; every other setting is --name-with-dashes.
SHORT_FLAGS = {
    "lease_seconds": "--lease",
    "heartbeat_seconds": "--heartbeat",
    "poll_seconds": "--poll",
    "grace_seconds": "--grace",
    "sweep_seconds": "--sweep",
    "prune_seconds": "--prune",
    "keep_succeeded_seconds": "--keep-succeeded",
    "keep_dead_seconds": "--keep-dead",
    "connect_wait_seconds": "--connect-wait",
    "timeout_seconds": "--timeout",
    "task_modules": "--tasks",
}


RATE = re.compile(r"^\s*([0-9]{1,9})\s*/\s*(s|m|h|second|minute|hour)\s*$")
RATE_PERIODS = {"s": 1.0, "second": 1.0, "m": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0}


def parse_rate(name: str, text: object) -> tuple[int, float]:
    """``"20/s"`` (also ``/m``, ``/h``) as (starts, period in seconds)."""
    found = RATE.match(text) if isinstance(text, str) else None
    if found is None or int(found.group(1)) < 1:
        raise SettingsError(
            f'{name} must be a number of starts per second, minute or hour, e.g. "20/s" or '
            f'"100/m", not {text!r}'
        )
    return int(found.group(1)), RATE_PERIODS[found.group(2)]


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


def argument_parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """Flags for every setting; values stay strings (or None) until :func:`load_settings`."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--config", help="TOML file with a [worker] table (default: $PAUTA_CONFIG, else none)"
    )
    for spec in fields(WorkerSettings):
        if spec.name in ENVIRONMENT_ONLY:
            continue
        flags = [f"--{spec.name.replace('_', '-')}"]
        if spec.name in SHORT_FLAGS:
            flags.insert(0, SHORT_FLAGS[spec.name])
        parser.add_argument(*flags, dest=spec.name, help=_help(spec.name, spec.default))
    return parser


def _help(name: str, default: Any) -> str:
    if name == "queues":
        return "queues and threads, e.g. default=4,notifications=2 (default: default=4)"
    if name == "task_modules":
        return "comma-separated modules whose @task functions to load"
    if name == "rate_limits":
        return "starts per period per queue, e.g. mail=20/s,reports=100/m (default: none)"
    return f"default: {default}"


def load_settings(
    arguments: argparse.Namespace, environ: Mapping[str, str], *, maintenance: bool = True
) -> WorkerSettings:
    """Settings from, in rising order of precedence: defaults, the TOML file, the environment
    variables of ``ENVIRONMENT``, and the command line. DATABASE_URL and PAUTA_LISTEN_URL come
    from the environment only."""
    values: dict[str, Any] = {}
    config = arguments.config or environ.get("PAUTA_CONFIG")
    if config:
        values.update(_read_toml(Path(config)))
    for name, variable in ENVIRONMENT.items():
        if environ.get(variable):
            values[name] = environ[variable]
    for spec in fields(WorkerSettings):
        given = getattr(arguments, spec.name, None)
        if given is not None:
            values[spec.name] = given
    values.setdefault("queues", {"default": 4})
    typed = {name: _typed(name, value) for name, value in values.items()}
    return WorkerSettings(
        database_url=environ.get("DATABASE_URL", ""),
        listen_url=environ.get("PAUTA_LISTEN_URL", ""),
        maintenance=maintenance,
        **typed,
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        document = tomllib.loads(path.read_text())
    except OSError as error:
        raise SettingsError(f"config: cannot read {path}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise SettingsError(f"config: {path} is not valid TOML: {error}") from None
    table = document.get("worker", {})
    known = {spec.name for spec in fields(WorkerSettings)} - ENVIRONMENT_ONLY
    for key in table:
        if key not in known:
            raise SettingsError(f"config: {path} has an unknown setting worker.{key}")
    return dict(table)


def _typed(name: str, value: Any) -> Any:
    """Convert a setting from the command line (a string) or TOML to its declared type."""
    kind = {spec.name: spec.type for spec in fields(WorkerSettings)}.get(name)
    if name == "queues":
        if isinstance(value, str):
            return parse_queues(value)
        if isinstance(value, Mapping):
            return dict(value)
        raise SettingsError("queues must be a table of queue = threads, e.g. default = 4")
    if name == "rate_limits":
        if isinstance(value, Mapping):
            return dict(value)
        if isinstance(value, str):
            limits = {}
            for item in filter(None, (part.strip() for part in value.split(","))):
                queue, _, rate = item.partition("=")
                limits[queue.strip()] = rate.strip()
            return limits
        raise SettingsError('rate_limits must be a table of queue = "N/s", e.g. mail = "20/s"')
    if name == "task_modules":
        if isinstance(value, str):
            return tuple(module.strip() for module in value.split(",") if module.strip())
        if isinstance(value, Sequence) and all(isinstance(item, str) for item in value):
            return tuple(value)
        raise SettingsError("task_modules must be a list of module names")
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in BOOLEANS:
            return BOOLEANS[value.lower()]
        raise SettingsError(f"{name} must be true or false, not {value!r}")
    try:
        if kind is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if kind is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
    except (TypeError, ValueError):
        noun = "a number of seconds" if kind is float else "a whole number"
        raise SettingsError(f"{name} must be {noun}, not {value!r}") from None
    if name == "log_level" and isinstance(value, str) and value.upper() in LOG_LEVELS:
        return value.upper()
    if name == "log_format" and isinstance(value, str) and value.lower() in LOG_FORMATS:
        return value.lower()
    if name in ("pooler", "prepare_threshold"):
        return str(value).strip().lower()
    return value
