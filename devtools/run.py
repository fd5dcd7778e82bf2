"""`make run`: database, migrations, a demo tenant (once), the worker, the console (gunicorn), a
local SMTP sink for the e-mails the worker sends, and a few demo jobs.

Stops everything it started on SIGINT (Ctrl-C) or SIGTERM and exits 0.
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

VAR = ROOT / "var"
BIN = Path(sys.executable).parent
PORT = int(os.environ.get("PORT", "8000"))
QUEUES = os.environ.get("PAUTA_QUEUES", "default=4,notifications=2")
TASKS = os.environ.get("PAUTA_TASK_MODULES", "hr.tasks")
SMTP_SINK_PORT = int(os.environ.get("PAUTA_SMTP_SINK_PORT", "8025"))
MAILDIR = VAR / "mail"
CREDENTIALS = VAR / "demo-credentials.txt"


def secret_key() -> str:
    path = VAR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


def flask(*args: str, env: dict[str, str]) -> None:
    subprocess.run([str(BIN / "flask"), "--app", "app", *args], env=env, cwd=ROOT, check=True)


def wait_for_health(url: str, children: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in children:
            if child.poll() is not None:
                raise SystemExit(f"{child.args[1]} exited with {child.returncode} while starting")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - our own URL
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"the console did not answer {url} within 60 s")


def seed_demo_once(env: dict[str, str]) -> None:
    """Build the demo tenant on the first run; keep its credentials in var/ to show every run."""
    seeded = subprocess.run(
        [str(BIN / "flask"), "--app", "app", "seed-demo"],
        env=env, cwd=ROOT, check=True, capture_output=True, text=True,
    )  # fmt: skip
    if "Log in with:" in seeded.stdout:
        CREDENTIALS.write_text(seeded.stdout)
        CREDENTIALS.chmod(0o600)
    if CREDENTIALS.exists():
        print(CREDENTIALS.read_text(), flush=True)


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


def demo(env: dict[str, str]) -> None:
    flask("jobs", "enqueue", "noop", "--count", "200", env=env)
    flask("jobs", "enqueue", "sleep", "--payload", '{"seconds": 2}', "--count", "8", env=env)
    flask("jobs", "enqueue", "fail", "--payload", '{"message": "demo failure"}',
          "--max-attempts", "2", env=env)  # fmt: skip
    flask("jobs", "enqueue", "noop", "--delay", "600", env=env)


def main() -> int:
    VAR.mkdir(exist_ok=True)
    with database_url() as (url, description):
        print(description, flush=True)
        return serve({**os.environ, "DATABASE_URL": url, "SECRET_KEY": secret_key()})


def serve(env: dict[str, str]) -> int:
    flask("db", "upgrade", env=env)
    seed_demo_once(env)
    env = mail_env(env)

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: stop.append(signum))
    signal.signal(signal.SIGINT, lambda signum, _: stop.append(signum))
    (VAR / "run.pid").write_text(str(os.getpid()))

    # Children get their own process group: Ctrl-C reaches only this process, which then sends
    # each child one SIGTERM (a second signal would make the worker stop without draining).
    worker = subprocess.Popen(
        [sys.executable, "worker.py", "--queues", QUEUES, "--tasks", TASKS],
        env=env,
        cwd=ROOT,
        process_group=0,
    )
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
    children = [worker, console, sink]
    try:
        wait_for_health(f"http://127.0.0.1:{PORT}/healthz", children)
        demo(env)
        print(f"\nPauta console: http://127.0.0.1:{PORT}/  (Ctrl-C stops everything)", flush=True)
        print(f"Jobs console (platform or HR admin): http://127.0.0.1:{PORT}/queues/", flush=True)
        print(f"E-mails: SMTP sink on 127.0.0.1:{SMTP_SINK_PORT}; read them in {MAILDIR}/new/"
              " (one file per message)\n", flush=True)  # fmt: skip
        while not stop and all(child.poll() is None for child in children):
            time.sleep(0.2)
    finally:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for child in children:
            child.wait(timeout=60)
        (VAR / "run.pid").unlink(missing_ok=True)
    failed = [child for child in children if child.returncode not in (0, -signal.SIGTERM)]
    if not stop:
        print("a child process exited on its own; stopped the rest", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
