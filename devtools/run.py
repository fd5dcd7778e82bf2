"""`make run`: database, migrations, a demo tenant and a few demo jobs (on the first run), the
worker, the console (gunicorn), and a local SMTP sink for the e-mails the worker sends.

A worker that exits 0 (it drained: a graceful shutdown asked from the console) is started
again, as a service manager that restarts it would; one that fails stops everything, and so
does the console or the sink ending. Stops everything it started on SIGINT (Ctrl-C) or SIGTERM
and exits 0, at whatever point the signal comes: a step already begun (a migration, the demo's
seeding, one of its `flask jobs enqueue` commands) is let finish, and nothing after it starts.
"""

import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from devtools.database import ROOT, database_url

VAR = Path(os.environ.get("PAUTA_VAR_DIR", ROOT / "var")).resolve()
BIN = Path(sys.executable).parent
PORT = int(os.environ.get("PORT", "8000"))
QUEUES = os.environ.get("PAUTA_QUEUES", "default=4,notifications=2,workflows=2")
TASKS = os.environ.get("PAUTA_TASK_MODULES", "hr.tasks")
SMTP_SINK_PORT = int(os.environ.get("PAUTA_SMTP_SINK_PORT", "8025"))
MAILDIR = VAR / "mail"
CREDENTIALS = VAR / "demo-credentials.txt"
RESTART_SECONDS = 1.0  # before a drained worker is started again


def secret_key() -> str:
    path = VAR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


def flask(*args: str, env: dict[str, str]) -> str:
    """Run a flask command of the app; its standard output. In a process group of its own, as
    every child here: Ctrl-C at the terminal reaches only this process, so a command is never
    cut in half (a migration, a seeding); it finishes, and this process stops after it."""
    done = subprocess.run(
        [str(BIN / "flask"), "--app", "app", *args],
        env=env, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True, process_group=0,
    )  # fmt: skip
    return done.stdout


def wait_for_health(url: str, children: list[subprocess.Popen[bytes]], stop: list[int]) -> None:
    """Wait until the console answers, or until a signal asks to stop (``stop`` not empty)."""
    deadline = time.monotonic() + 60
    while not stop and time.monotonic() < deadline:
        for child in children:
            if child.poll() is not None:
                raise SystemExit(f"{child.args[1]} exited with {child.returncode} while starting")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own URL
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    if not stop:
        raise SystemExit(f"the console did not answer {url} within 60 s")


def seed_demo_once(env: dict[str, str]) -> bool:
    """Build the demo tenant on the first run and keep its log-ins in var/; print them on every
    run. True if this run built it."""
    seeded = flask("seed-demo", env=env)
    first = "Log in with:" in seeded
    if first:
        print(seeded, end="", flush=True)
        logins = seeded[seeded.index("Log in with:") :]
        CREDENTIALS.write_text(logins)
        CREDENTIALS.chmod(0o600)
    elif CREDENTIALS.exists():
        print(f"Demo tenant 'demo' (built on the first run). {CREDENTIALS.read_text()}", end="")
    return first


def mail_env(env: dict[str, str]) -> dict[str, str]:
    """Send the worker's e-mail to the local sink, unless SMTP_HOST names a real server."""
    if env.get("SMTP_HOST"):
        return env
    return {
        **env,
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(SMTP_SINK_PORT),
        "PAUTA_BASE_URL": env.get("PAUTA_BASE_URL", f"http://127.0.0.1:{PORT}"),
    }


DEMO_JOBS = (  # (what the summary calls them, the arguments of `flask jobs enqueue`)
    ("200 noop", ("noop", "--count", "200")),
    ("8 sleep of 2 s", ("sleep", "--payload", '{"seconds": 2}', "--count", "8")),
    ("1 fail with 2 attempts",
     ("fail", "--payload", '{"message": "demo failure"}', "--max-attempts", "2")),
    ("1 noop in 10 minutes", ("noop", "--delay", "600")),
)  # fmt: skip


def demo(env: dict[str, str], stop: list[int]) -> None:
    """A few jobs to watch in the console, enqueued with the CLI; their ids are not printed.
    A signal (``stop`` not empty) leaves out the ones not yet enqueued."""
    enqueued = []
    for name, arguments in DEMO_JOBS:
        if stop:
            break
        flask("jobs", "enqueue", *arguments, env=env)
        enqueued.append(name)
    if enqueued:
        print("Demo jobs enqueued: " + ", ".join(enqueued) + ".", flush=True)


def main() -> int:
    VAR.mkdir(parents=True, exist_ok=True)
    stop: list[int] = []  # the signals received: any of them stops everything
    signal.signal(signal.SIGTERM, lambda signum, _: stop.append(signum))
    signal.signal(signal.SIGINT, lambda signum, _: stop.append(signum))
    with database_url() as (url, description):
        print(description, flush=True)
        env = {**os.environ, "DATABASE_URL": url, "SECRET_KEY": secret_key()}
        return stopped_while_setting_up() if stop else serve(env, stop)


def stopped_while_setting_up() -> int:
    print("Stopped by a signal while setting up; nothing was left running.", flush=True)
    return 0


def start_worker(env: dict[str, str]) -> subprocess.Popen[bytes]:
    # Children get their own process group: Ctrl-C reaches only this process, which then sends
    # each child one SIGTERM (a second signal would make the worker stop without draining).
    return subprocess.Popen(
        [sys.executable, "worker.py", "--queues", QUEUES, "--tasks", TASKS],
        env=env,
        cwd=ROOT,
        process_group=0,
    )


def serve(env: dict[str, str], stop: list[int]) -> int:
    """Migrate, seed, then run the children until a signal comes (``stop`` not empty) or one of
    them ends. A signal before the children start ends the setting-up after its current step."""
    flask("db", "upgrade", env=env)
    first_run = not stop and seed_demo_once(env)
    if stop:
        return stopped_while_setting_up()
    env = mail_env(env)
    (VAR / "run.pid").write_text(str(os.getpid()))

    worker = start_worker(env)
    # aiosmtpd's own command line: every message it receives becomes a file in var/mail/new/.
    sink = subprocess.Popen(
        [sys.executable, "-m", "aiosmtpd", "-n", "-l", f"127.0.0.1:{SMTP_SINK_PORT}",
         "-c", "aiosmtpd.handlers.Mailbox", str(MAILDIR)],
        env=env, cwd=ROOT, process_group=0,
    )  # fmt: skip
    console = subprocess.Popen(
        [
            str(BIN / "gunicorn"),
            "wsgi:app",
            "--bind",
            f"127.0.0.1:{PORT}",
            "--workers",
            "2",
            "--no-control-socket",
        ],
        env=env,
        cwd=ROOT,
        process_group=0,
    )
    ended: list[subprocess.Popen[bytes]] = []  # what ended on its own, if anything did
    try:
        wait_for_health(f"http://127.0.0.1:{PORT}/healthz", [worker, console, sink], stop)
        if first_run:
            demo(env, stop)
        if not stop:
            print(f"\nPauta console: http://127.0.0.1:{PORT}/  (Ctrl-C stops everything)",
                  flush=True)  # fmt: skip
            print(f"Jobs console (platform or HR admin): http://127.0.0.1:{PORT}/queues/",
                  flush=True)  # fmt: skip
            print(f"E-mails: SMTP sink on 127.0.0.1:{SMTP_SINK_PORT}; read them in"
                  f" {MAILDIR}/new/ (one file per message)\n", flush=True)  # fmt: skip
        while not stop and not (ended := [c for c in (console, sink) if c.poll() is not None]):
            if worker.poll() == 0:
                print("worker.py drained and exited 0 (a shutdown asked from the console): "
                      "starting it again", flush=True)  # fmt: skip
                time.sleep(RESTART_SECONDS)
                worker = start_worker(env)
            elif worker.poll() is not None:
                ended = [worker]
                break
            time.sleep(0.2)
    finally:
        children = [worker, console, sink]
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait(timeout=60)
        (VAR / "run.pid").unlink(missing_ok=True)
    if not stop:
        print(f"{ended[0].args[1]} exited with {ended[0].returncode} on its own; stopped the rest",
              file=sys.stderr)  # fmt: skip
        return 1
    failed = [child for child in children if child.returncode not in (0, -signal.SIGTERM)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
