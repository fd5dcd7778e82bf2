"""Run background jobs: ``python worker.py --queues notifications=4,default=8,reports=2``.

By default a supervisor starts one child process per queue, each with its own pool of threads,
restarts children that crash, and runs the leader's maintenance. ``--single`` runs every queue
in this one process instead (no supervisor).

Signals: SIGTERM or SIGINT drains (stop claiming, finish running jobs within the grace period,
release the rest, exit 0); a second SIGTERM/SIGINT, or SIGQUIT, stops at once, releasing what
runs. Settings come from pauta.toml (``--config`` or PAUTA_CONFIG) and the command line, which
wins; see docs/reference/settings.md.
"""

import json
import logging
import os
import signal
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from queue import Empty, SimpleQueue

from jobqueue import telemetry
from jobqueue.connections import DatabaseNotReady, check_database
from jobqueue.errors import ConfigurationError
from jobqueue.logs import configure_logging
from jobqueue.registry import import_task_modules
from jobqueue.runner import Runner
from jobqueue.settings import WorkerSettings, argument_parser, load_settings
from jobqueue.supervisor import (
    EXIT_CONFIG,
    EXIT_OK,
    EXIT_RECYCLE,
    EXIT_SOFTWARE,
    EXIT_UNAVAILABLE,
    ChildCommand,
    Supervisor,
)

CHILD_SETTINGS = "PAUTA_CHILD_SETTINGS"  # the supervisor's settings, as JSON, for its children
PARENT_CHECK_SECONDS = 0.5

log = logging.getLogger("worker")


def main(argv: list[str]) -> int:
    parser = argument_parser("worker.py", __doc__)
    parser.add_argument("--single", action="store_true", help="run all queues in this process")
    parser.add_argument("--child", metavar="QUEUE", help="(internal) serve QUEUE for a supervisor")
    parser.add_argument("--parent-id", type=int, help="(internal) the supervisor's workers row")
    parser.add_argument("--parent-pid", type=int, help="(internal) the supervisor's pid")
    arguments = parser.parse_args(argv)
    try:
        if arguments.child:
            inherited = json.loads(os.environ[CHILD_SETTINGS])
            inherited["task_modules"] = tuple(inherited["task_modules"])
            settings = WorkerSettings(**inherited).for_queue(arguments.child)
        else:
            settings = load_settings(arguments, environment(), maintenance=True)
        configure_logging(settings.log_level, settings.log_format)
        telemetry.configure("pauta-worker")  # each process after its fork+exec; off if unset
        import_task_modules(settings.task_modules)
    except ConfigurationError as error:
        print(f"worker.py: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except ImportError as error:
        print(f"worker.py: cannot import task module: {error}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        check_database(settings.database_url, settings.connect_wait_seconds, settings.prepare_after)
    except DatabaseNotReady as error:
        print(f"worker.py: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE if error.retryable else EXIT_CONFIG
    if arguments.child:
        return run_runner(settings, arguments.parent_id, arguments.parent_pid)
    if arguments.single:
        return run_runner(settings, None, None)
    return Supervisor(settings, child_command(settings)).run()


def environment() -> dict[str, str]:
    """The environment settings are read from: with DATABASE_URL unset, the embedded PostgreSQL
    that `make run` uses in this checkout, if there is one (saying so; see devtools.database)."""
    environ = dict(os.environ)
    if not environ.get("DATABASE_URL"):
        from devtools.database import embedded_database

        found = embedded_database()
        if found is not None:
            environ["DATABASE_URL"], description = found
            print(f"worker.py: {description}", file=sys.stderr, flush=True)
    return environ


def child_command(settings: WorkerSettings) -> ChildCommand:
    """How the supervisor starts the child of a queue: this script, with the same settings."""
    os.environ[CHILD_SETTINGS] = json.dumps(asdict(settings))
    script = str(Path(__file__).resolve())
    supervisor_pid = str(os.getpid())

    def command(queue: str, parent_id: int) -> list[str]:
        return [
            sys.executable, script, "--child", queue,
            "--parent-id", str(parent_id), "--parent-pid", supervisor_pid,
        ]  # fmt: skip

    return command


def run_runner(settings: WorkerSettings, parent_id: int | None, parent: int | None) -> int:
    """Serve until a signal, a drain asked through the workers table, or the parent's death."""
    signals: SimpleQueue[int] = SimpleQueue()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1):
        signal.signal(signum, lambda signum, _frame: signals.put(signum))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # settings are read at start only
    if parent is not None:
        die_with_parent()
    settings.configure_interpreter()

    runner = Runner(settings, parent_id=parent_id)
    runner.start()
    while True:
        if runner.crashed.is_set():
            log.error("a part of the worker crashed; stopping")
            break
        if runner.drain_requested.is_set():
            break
        if runner.recycle.is_set():
            log.warning("threads given up to timed-out tasks; draining to be replaced")
            break
        if parent is not None and os.getppid() != parent:
            log.warning("the supervisor is gone; draining")
            break
        try:
            first = signals.get(timeout=PARENT_CHECK_SECONDS)
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
            again = signals.get(timeout=0.1)
        except Empty:
            continue
        if again == signal.SIGUSR1:  # a drain request is idempotent: it never escalates
            continue
        log.info("received %s again: stopping now", signal.Signals(again).name)
        runner.hurry.set()
    if runner.crashed.is_set():
        return EXIT_SOFTWARE
    return EXIT_RECYCLE if runner.recycle.is_set() else EXIT_OK


def die_with_parent() -> None:
    """Ask Linux to send this child SIGUSR1 (drain) when its supervisor dies."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGUSR1)
    except (OSError, AttributeError):
        pass  # not Linux: the parent-pid check in the main loop covers it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
