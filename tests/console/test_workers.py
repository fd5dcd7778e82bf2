"""The workers page's tree: supervisors hold their children; a drain's jobs left add up."""

from typing import Any

from console.workers import tree


def row(worker_id: int, parent: int | None = None, **values: Any) -> dict[str, Any]:
    base = {"id": worker_id, "parent_id": parent, "state": "running", "silent_seconds": 1.0,
            "holding": 0, "drain_requested_at": None}  # fmt: skip
    return base | values


def test_children_nest_under_their_supervisor_and_live_ones_come_first() -> None:
    workers = tree([
        row(1, state="stopped"), row(2), row(3, parent=2, holding=2), row(4, parent=2, holding=1),
        row(5, parent=99), row(6, silent_seconds=300.0),
    ])  # fmt: skip
    assert [node.row["id"] for node in workers.nodes] == [6, 5, 2, 1]
    supervisor = workers.nodes[2]
    assert [child.row["id"] for child in supervisor.children] == [3, 4]
    assert supervisor.jobs_left == 3 and not supervisor.draining
    assert workers.nodes[0].silent and not supervisor.silent
    assert len(workers.live) == 3


def test_a_drain_asked_counts_as_draining_until_the_worker_stops() -> None:
    asked = tree([row(1, drain_requested_at="now", holding=4), row(2, state="draining")])
    assert [node.draining for node in asked.nodes] == [True, True]
    assert asked.jobs_left_draining == 4
    stopped = tree([row(1, state="stopped", drain_requested_at="now")])
    assert not stopped.nodes[0].draining and stopped.draining == []
