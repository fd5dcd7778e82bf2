"""Benchmark adapters for peer PostgreSQL job queues (see `_common.PeerBase` for the protocol).

Each ``<name>_peer`` module exposes a ``Peer`` class; modules are imported lazily so that a
missing peer library only affects that peer.
"""

from __future__ import annotations

import importlib

PEERS = ["pgqueuer", "procrastinate", "awa"]


def load(name: str) -> type:
    """Return the ``Peer`` class of the named peer."""
    if name not in PEERS:
        raise ValueError(f"unknown peer {name!r}; expected one of {PEERS}")
    peer: type = importlib.import_module(f"{__name__}.{name}_peer").Peer
    return peer
