"""The workers page: supervisors with their children, and how far each drain has got."""

from dataclasses import dataclass, field

from jobqueue.inspect import LIVE_WITHIN_SECONDS, Row
from jobqueue.states import WorkerState

LIVE_STATES = (WorkerState.RUNNING, WorkerState.DRAINING)


@dataclass(slots=True)
class WorkerNode:
    row: Row
    children: list["WorkerNode"] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.row["state"] in LIVE_STATES

    @property
    def silent(self) -> bool:
        """Live by its state, but no heartbeat for longer than a live worker stays quiet."""
        return self.live and self.row["silent_seconds"] > LIVE_WITHIN_SECONDS

    @property
    def jobs_left(self) -> int:
        """Running jobs this process (or, for a supervisor, its children) still holds."""
        return int(self.row["holding"]) + sum(child.jobs_left for child in self.children)

    @property
    def draining(self) -> bool:
        """Stopping, or asked to and about to notice (at its next heartbeat)."""
        asked = self.row["drain_requested_at"] is not None
        return self.row["state"] == WorkerState.DRAINING or (self.live and asked)


@dataclass(slots=True)
class Workers:
    nodes: list[WorkerNode]  # supervisors and --single workers; children inside them

    @property
    def live(self) -> list[WorkerNode]:
        return [node for node in self.nodes if node.live]

    @property
    def draining(self) -> list[WorkerNode]:
        return [node for node in self.nodes if node.draining]

    @property
    def jobs_left_draining(self) -> int:
        return sum(node.jobs_left for node in self.draining)


def tree(rows: list[Row]) -> Workers:
    """Nest children under their supervisors (a child whose supervisor row is gone stands
    alone); live processes first, then the newest."""
    nodes = {row["id"]: WorkerNode(row) for row in rows}
    top: list[WorkerNode] = []
    for node in nodes.values():
        parent = nodes.get(node.row["parent_id"])
        if parent is None:
            top.append(node)
        else:
            parent.children.append(node)
    top.sort(key=lambda node: (not node.live, -node.row["id"]))
    return Workers(top)
