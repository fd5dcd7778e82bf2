"""A real PgBouncer (Debian's /usr/sbin/pgbouncer) on loopback, in transaction pooling, in front
of the test server: every database of the server is reachable through it under the same name.

PgBouncer refuses to run as root, so under root it runs as the ``postgres`` system user (as
devtools.cluster runs the server binaries). Its settings are what the deployment docs ask for:
``pool_mode = transaction``, a server pool smaller than the clients, and timeouts that end a
transaction left idle and a client left waiting, so a test that leaks either fails instead of
hanging.
"""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

import psycopg
import pytest
from sqlalchemy.engine import make_url

BINARY = Path("/usr/sbin/pgbouncer")


def available() -> str | None:
    """None when a PgBouncer can be started here, else the reason it cannot."""
    if not BINARY.exists():
        return f"{BINARY} is missing (Debian package pgbouncer; .ci/run installs it)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser, and PgBouncer refuses to run as root"
    return None


def unprepared_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``psycopg.connect`` default to no server-side prepared statements for the rest of
    the test. The engine and the app pass their own threshold (that is what the test checks);
    this covers the test's own helper connections, whose repeated reads (``wait_until``) would
    otherwise be prepared on one server connection and run on another."""
    original = psycopg.Connection.connect.__func__  # type: ignore[attr-defined]

    def connect(cls: type[psycopg.Connection[Any]], conninfo: str = "", **kwargs: Any) -> Any:
        kwargs.setdefault("prepare_threshold", None)
        return original(cls, conninfo, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "connect", classmethod(connect))
    monkeypatch.setattr(psycopg, "connect", psycopg.Connection.connect)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgBouncer:
    """``with PgBouncer(server_url) as bouncer:`` ``bouncer.url(database)`` goes through it."""

    def __init__(self, server_url: str, *, pool_size: int = 20) -> None:
        server = make_url(server_url)
        self.user = server.username or "postgres"
        self.server_host = server.host or "127.0.0.1"
        self.server_port = server.port or 5432
        self.pool_size = pool_size
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="pauta-pgbouncer-"))
        self.log = self.folder / "pgbouncer.log"
        self._process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def _write_config(self) -> Path:
        (self.folder / "users.txt").write_text(f'"{self.user}" ""\n')
        config = self.folder / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={self.server_host} port={self.server_port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder / 'users.txt'}\n"
            f"admin_users = {self.user}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\n"
            "max_client_conn = 1000\n"
            "idle_transaction_timeout = 60\n"
            "query_wait_timeout = 60\n"
            f"logfile = {self.log}\n"
            f"pidfile = {self.folder / 'pgbouncer.pid'}\n"
        )
        return config

    def __enter__(self) -> Self:
        config = self._write_config()
        argv = [str(BINARY), str(config)]
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            for path in self.folder.iterdir():
                shutil.chown(path, "postgres", "postgres")
            argv = ["runuser", "-u", "postgres", "--", *argv]
        self._process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    log = self._log_text()
                    raise RuntimeError(f"pgbouncer did not start; its log:\n{log}") from None
                time.sleep(0.05)

    def __exit__(self, *_exc: object) -> None:
        pidfile = self.folder / "pgbouncer.pid"
        if pidfile.exists():  # PgBouncer itself, not runuser in front of it
            with contextlib.suppress(ValueError, ProcessLookupError):
                os.kill(int(pidfile.read_text().strip()), signal.SIGTERM)
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else "(no log)"
