"""Run background jobs: ``python worker.py --queues default=4,notifications=2``.

SIGTERM or SIGINT drains (stop claiming, finish running jobs within the grace period, release
the rest, exit 0); a second SIGTERM/SIGINT, or SIGQUIT, stops at once, releasing what runs.
"""

import argparse
import logging
import os
import signal
import sys
import threading
from queue import Empty, SimpleQueue

from jobqueue import settings as defaults
from jobqueue.connections import DatabaseNotReady, check_database
from jobqueue.registry import import_task_modules
from jobqueue.runner import Runner
from jobqueue.settings import RunnerSettings, SettingsError, parse_queues

EXIT_OK = 0
EXIT_UNAVAILABLE = 69  # EX_UNAVAILABLE: the database could not be reached at start
EXIT_SOFTWARE = 70  # EX_SOFTWARE: a bug stopped the runner
EXIT_CONFIG = 78  # EX_CONFIG: the settings are wrong; restarting will not help

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

log = logging.getLogger("worker")


def parse_settings(argv: list[str]) -> RunnerSettings:
    parser = argparse.ArgumentParser(prog="worker.py", description=__doc__)
    parser.add_argument("--queues", default=os.environ.get("PAUTA_QUEUES", "default=4"))
    parser.add_argument("--tasks", default=os.environ.get("PAUTA_TASK_MODULES", ""))
    parser.add_argument("--grace", type=float, default=defaults.DEFAULT_GRACE_SECONDS)
    parser.add_argument("--lease", type=float, default=defaults.DEFAULT_LEASE_SECONDS)
    parser.add_argument("--heartbeat", type=float, default=defaults.DEFAULT_HEARTBEAT_SECONDS)
    parser.add_argument("--poll", type=float, default=defaults.DEFAULT_POLL_SECONDS)
    parser.add_argument("--prefetch", type=int, default=defaults.DEFAULT_PREFETCH)
    parser.add_argument("--sweep", type=float, default=defaults.DEFAULT_SWEEP_SECONDS)
    parser.add_argument("--prune", type=float, default=defaults.DEFAULT_PRUNE_SECONDS)
    parser.add_argument(
        "--keep-succeeded", type=float, default=defaults.DEFAULT_KEEP_SUCCEEDED_SECONDS
    )
    parser.add_argument("--keep-dead", type=float, default=defaults.DEFAULT_KEEP_DEAD_SECONDS)
    parser.add_argument("--no-maintenance", action="store_true")
    parser.add_argument("--connect-wait", type=float, default=defaults.DEFAULT_CONNECT_WAIT_SECONDS)
    parser.add_argument("--log-level", default=os.environ.get("PAUTA_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)
    level = args.log_level.upper()
    if level not in LOG_LEVELS:
        raise SettingsError(
            f"log_level must be one of {', '.join(LOG_LEVELS)}, not {args.log_level!r}"
        )
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return RunnerSettings(
        database_url=os.environ.get("DATABASE_URL", ""),
        queues=parse_queues(args.queues),
        grace_seconds=args.grace,
        lease_seconds=args.lease,
        heartbeat_seconds=args.heartbeat,
        poll_seconds=args.poll,
        prefetch=args.prefetch,
        sweep_seconds=args.sweep,
        prune_seconds=args.prune,
        keep_succeeded_seconds=args.keep_succeeded,
        keep_dead_seconds=args.keep_dead,
        maintenance=not args.no_maintenance,
        connect_wait_seconds=args.connect_wait,
        task_modules=tuple(name.strip() for name in args.tasks.split(",") if name.strip()),
    )


def serve(settings: RunnerSettings) -> int:
    signals: SimpleQueue[int] = SimpleQueue()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, lambda signum, _frame: signals.put(signum))

    runner = Runner(settings)
    runner.start()
    while not runner.crashed.is_set():
        try:
            first = signals.get(timeout=0.5)
        except Empty:
            continue
        log.info("received %s: draining", signal.Signals(first).name)
        if first == signal.SIGQUIT:
            runner.hurry.set()
        break
    stopper = threading.Thread(target=runner.stop, name="stopper")
    stopper.start()
    while stopper.is_alive():
        try:
            signum = signals.get(timeout=0.1)
        except Empty:
            continue
        log.info("received %s again: stopping now", signal.Signals(signum).name)
        runner.hurry.set()
    return EXIT_SOFTWARE if runner.crashed.is_set() else EXIT_OK


def main(argv: list[str]) -> int:
    try:
        settings = parse_settings(argv)
        import_task_modules(settings.task_modules)
    except SettingsError as error:
        print(f"worker.py: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except ImportError as error:
        print(f"worker.py: cannot import task module: {error}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        check_database(settings.database_url, settings.connect_wait_seconds)
    except DatabaseNotReady as error:
        print(f"worker.py: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE if error.retryable else EXIT_CONFIG
    return serve(settings)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
