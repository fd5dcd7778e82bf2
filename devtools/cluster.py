"""A throwaway PostgreSQL cluster of our own, for runs that must restart or stop the server
(chaos, soaks, failover) and so cannot use a shared one.

It uses the server binaries of the machine's PostgreSQL (Debian's /usr/lib/postgresql/N/bin,
or whatever ``pg_config --bindir`` names), runs them as the ``postgres`` system user when we are
root (initdb refuses root), keeps its data in a temporary folder and listens on a free loopback
port. Settings are production's where they matter to what is measured: fsync, synchronous
commit and autovacuum on.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

import psycopg

SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "max_connections": "300",
    "shared_buffers": "'256MB'",
    "fsync": "on",
    "synchronous_commit": "on",
    "autovacuum": "on",
    "log_min_messages": "warning",
    "log_lock_waits": "on",
    "deadlock_timeout": "'1s'",
}


def server_binaries() -> Path:
    """The folder holding initdb and pg_ctl."""
    configured = shutil.which("pg_config")
    if configured:
        folder = subprocess.run(
            [configured, "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not versions:
        raise RuntimeError("no PostgreSQL server binaries found (initdb, pg_ctl)")
    return versions[-1].parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Cluster:
    """``with Cluster() as cluster:`` a running server at ``cluster.url(database)``."""

    def __init__(
        self, settings: dict[str, str] | None = None, *, wrapper: tuple[str, ...] = ()
    ) -> None:
        self.bin = server_binaries()
        self.port = free_port()
        self.settings = {**SETTINGS, **(settings or {})}
        self.folder = Path(tempfile.mkdtemp(prefix="pauta-cluster-"))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self._as_postgres = os.geteuid() == 0
        self.wrapper = wrapper  # a command the server binaries run under, e.g. ip netns exec NS
        self._standbys: list[Cluster] = []

    def _run(self, *command: str | Path, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(part) for part in command]
        if self._as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        argv = [*self.wrapper, *argv]
        return subprocess.run(argv, capture_output=True, text=True, check=check)

    def __enter__(self) -> Self:
        if self._as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run(
            self.bin / "initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8"
        )
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {self.port}\n")
            conf.write(f"unix_socket_directories = '{self.folder}'\n")
            for name, value in self.settings.items():
                conf.write(f"{name} = {value}\n")
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        for replica in self._standbys:
            replica.__exit__()
        self.stop("immediate", check=False)
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def recycle_wal(self, segments: int = 48) -> None:
        """Leave ``segments`` WAL segments written, checkpointed and recycled, as a server that
        has been running has them: a fresh cluster writes its first WAL into new segments, each
        zero-filled (16 MB) when the first commit needs it, while every committing session waits
        (a 10-20 ms stall about every 1.6 s of a workflow drain on this machine)."""
        with psycopg.connect(self.url(), autocommit=True) as conn:
            for _ in range(segments):
                conn.execute("SELECT pg_logical_emit_message(false, 'pauta', '')")
                conn.execute("SELECT pg_switch_wal()")
            conn.execute("CHECKPOINT")

    def trust(self, network: str) -> None:
        """Let clients from ``network`` (a CIDR) in without a password, as loopback is."""
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write(f"host all all {network} trust\n")
        self._run(self.bin / "pg_ctl", "-D", self.data, "reload")

    def socket_url(self, database: str = "postgres") -> str:
        """The URL over the server's Unix socket, which needs no network (nor one namespace)."""
        return f"postgresql://postgres@/{database}?host={self.folder}&port={self.port}"

    def start(self) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast", *, check: bool = True) -> None:
        self._run(self.bin / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop", check=check)

    def restart(self, mode: str = "immediate") -> float:
        """Stop in ``mode`` and start again; returns the seconds the server was down."""
        started = time.monotonic()
        self.stop(mode)
        self.start()
        return time.monotonic() - started

    def standby(self, name: str = "pauta_standby") -> "Cluster":
        """A streaming standby of this server, started, on a port and in a folder of its own:
        ``pg_basebackup`` of this one, then ``primary_conninfo`` naming it ``name`` (what
        ``synchronous_standby_names`` refers to). Stop it with ``stop`` or leave it to the
        primary's ``__exit__``, which stops both."""
        replica = Cluster(self.settings, wrapper=self.wrapper)
        if replica._as_postgres:
            shutil.chown(replica.folder, "postgres", "postgres")
        replica._run(
            self.bin / "pg_basebackup", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
            "-D", replica.data, "-X", "stream", "-c", "fast",
        )  # fmt: skip
        with (replica.data / "postgresql.conf").open("a") as conf:
            conf.write(f"port = {replica.port}\n")
            conf.write(f"unix_socket_directories = '{replica.folder}'\n")
            conf.write(
                f"primary_conninfo = 'host=127.0.0.1 port={self.port} user=postgres "
                f"application_name={name}'\n"
            )
        (replica.data / "standby.signal").touch()
        if replica._as_postgres:
            shutil.chown(replica.data / "standby.signal", "postgres", "postgres")
        replica.start()
        self._standbys.append(replica)
        return replica

    def promote(self) -> None:
        """Make this standby a primary, and wait until it accepts writes."""
        self._run(self.bin / "pg_ctl", "-D", self.data, "-w", "promote")

    def create_database(self, name: str) -> str:
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)
