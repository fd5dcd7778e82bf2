"""Worker hosts as Linux network namespaces, and a database host as one more.

``Network(hosts=3)`` makes a namespace for the database and one per worker host, each worker
host joined to the database's namespace by a veth pair of its own, with addresses only inside
the namespaces (10.213.N.1 on the database's end, 10.213.N.2 on host N's): the machine's own
interfaces and routes are not touched. ``cut(n)`` and ``mend(n)`` take host N's end of its link
down and up. The database server runs inside its namespace (see ``Cluster(wrapper=...)``), and
the test reaches it over its Unix socket, which no network namespace separates.
"""

import os
import secrets
import subprocess
from typing import Self


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def unavailable() -> str | None:
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return "making network namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN)"
    probe = f"pauta-probe-{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (OSError, subprocess.CalledProcessError) as error:
        detail = getattr(error, "stderr", "") or str(error)
        return f"cannot create a network namespace: {detail.strip()}"
    _ip("netns", "delete", probe)
    return None


class Network:
    def __init__(self, hosts: int) -> None:
        tag = secrets.token_hex(2)
        self.database = f"pauta-db-{tag}"
        self.hosts = [f"pauta-h{n}-{tag}" for n in range(1, hosts + 1)]

    def exec_prefix(self, namespace: str) -> tuple[str, ...]:
        return ("ip", "netns", "exec", namespace)

    def server_address(self, n: int) -> str:
        """The database's address as host N (1-based) reaches it."""
        return f"10.213.{n}.1"

    def __enter__(self) -> Self:
        made: list[str] = []
        try:
            for namespace in (self.database, *self.hosts):
                _ip("netns", "add", namespace)
                made.append(namespace)
                _ip("-n", namespace, "link", "set", "lo", "up")
            for n, host in enumerate(self.hosts, start=1):
                _ip(
                    "-n", self.database, "link", "add", f"vdb{n}", "type", "veth",
                    "peer", "name", f"vh{n}", "netns", host,
                )  # fmt: skip
                _ip("-n", self.database, "addr", "add", f"10.213.{n}.1/24", "dev", f"vdb{n}")
                _ip("-n", host, "addr", "add", f"10.213.{n}.2/24", "dev", f"vh{n}")
                _ip("-n", self.database, "link", "set", f"vdb{n}", "up")
                _ip("-n", host, "link", "set", f"vh{n}", "up")
        except BaseException:
            for namespace in made:
                subprocess.run(["ip", "netns", "delete", namespace], check=False)
            raise
        return self

    def __exit__(self, *_exc: object) -> None:
        for namespace in (*self.hosts, self.database):
            subprocess.run(["ip", "netns", "delete", namespace], check=False, capture_output=True)

    def cut(self, n: int) -> None:
        _ip("-n", self.hosts[n - 1], "link", "set", f"vh{n}", "down")

    def mend(self, n: int) -> None:
        _ip("-n", self.hosts[n - 1], "link", "set", f"vh{n}", "up")
