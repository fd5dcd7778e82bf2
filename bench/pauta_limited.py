"""Pauta's bare runner on a queue with a rate limit far above what it can drain (1,000,000 starts
a second): every claim locks, refills and spends the queue's token bucket, and none is held back.
The benchmark compares its drain with bench.pauta_fifo's."""

from typing import ClassVar

from bench.pauta_system import Peer as BareRunnerPeer
from bench.pauta_system import run_runner


class Peer(BareRunnerPeer):
    PROFILES: ClassVar[dict[str, str]] = {"defaults": "defaults and a rate limit of 1,000,000/s"}
    name = "pauta-limited"


if __name__ == "__main__":
    run_runner(rate_limits={"default": "1000000/s"})
