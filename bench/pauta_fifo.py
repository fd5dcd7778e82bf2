"""Pauta's bare runner with fair shares between tenants off (``fair_tenants = false``): the claim
takes jobs in plain (priority, available_at, id) order, as before fair shares existed. The
benchmark compares the default runner (fair shares on) and bench.pauta_limited with it."""

from typing import ClassVar

from bench.pauta_system import Peer as BareRunnerPeer
from bench.pauta_system import run_runner


class Peer(BareRunnerPeer):
    PROFILES: ClassVar[dict[str, str]] = {"defaults": "defaults but fair_tenants false"}
    name = "pauta-fifo"


if __name__ == "__main__":
    run_runner(fair_tenants=False)
