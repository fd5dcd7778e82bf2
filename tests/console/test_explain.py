"""Why a job is where it is: one sentence per case, from the row alone (no database)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from console.explain import explain

NOW = datetime(2026, 11, 30, 14, 0, 0, tzinfo=UTC)


def job(**overrides: Any) -> dict[str, Any]:
    row = {
        "state": "available", "available_at": NOW - timedelta(seconds=30), "now": NOW,
        "attempt": 0, "max_attempts": 5, "queue_paused": False, "queue_paused_by": None,
        "queue_paused_at": None, "live_workers": 2, "last_error": None, "finished_at": None,
        "locked_by": None, "lease_expires_at": None, "started_at": None,
    }  # fmt: skip
    return row | overrides


@pytest.mark.parametrize(
    ("overrides", "label", "reason", "actions"),
    [
        ({}, "waiting", "waiting for a free worker since 30 Nov 13:59:30 UTC (30.0 s ago)",
         ("cancel",)),
        ({"queue_paused": True, "queue_paused_by": "ana@x.example",
          "queue_paused_at": NOW - timedelta(minutes=5)}, "waiting",
         "waiting: queue paused by ana@x.example since 30 Nov 13:55:00 UTC", ("cancel",)),
        ({"live_workers": 0}, "waiting", "waiting: no live worker serves this queue", ("cancel",)),
        ({"available_at": NOW + timedelta(minutes=5)}, "scheduled",
         "scheduled for 30 Nov 14:05:00 UTC (in 5 min)", ("run_now", "cancel")),
        ({"available_at": NOW + timedelta(seconds=40), "attempt": 3, "live_workers": 0},
         "backing off", "backing off after attempt 3 of 5; next try at 30 Nov 14:00:40 UTC "
         "(in 40.0 s); no live worker serves its queue now", ("run_now", "cancel")),
        ({"state": "running", "attempt": 2, "locked_by": "h:1:abc", "started_at": NOW,
          "lease_expires_at": NOW + timedelta(seconds=20)}, "running",
         "running on h:1:abc: attempt 2 of 5, claimed now, lease until 14:00:20 UTC",
         ("cancel",)),
        ({"state": "running", "attempt": 2, "locked_by": "h:1:abc", "started_at": NOW,
          "lease_expires_at": NOW + timedelta(seconds=20),
          "cancel_requested_at": NOW - timedelta(seconds=3)}, "running",
         "running on h:1:abc: attempt 2 of 5, claimed now, lease until 14:00:20 UTC; cancel "
         "requested 3.0 s ago: it stops when its task next checks, or at its timeout, and is not "
         "retried", ()),
        ({"state": "running", "attempt": 2, "locked_by": "h:1:abc", "started_at": NOW,
          "lease_expires_at": NOW - timedelta(seconds=20)}, "running",
         "claimed by h:1:abc, whose lease expired 20.0 s ago: the sweeper will put it back",
         ("cancel",)),
        ({"state": "succeeded", "attempt": 1, "finished_at": NOW}, "succeeded",
         "succeeded at 30 Nov 14:00:00 UTC on attempt 1", ()),
        ({"state": "dead", "attempt": 5, "last_error": "ValueError: x"}, "dead",
         "dead: attempt 5 of 5 failed and no attempt is left", ("requeue", "discard")),
        ({"state": "dead", "attempt": 1, "last_error": "PermanentError: x"}, "dead",
         "dead: a permanent error on attempt 1 of 5, so no retry", ("requeue", "discard")),
        ({"state": "dead", "attempt": 5, "last_error": "LeaseExpired: worker h:1:abc ..."}, "dead",
         "dead: its worker stopped renewing the lease on its last attempt (attempt 5 of 5)",
         ("requeue", "discard")),
        ({"state": "cancelled", "finished_at": NOW}, "cancelled",
         "cancelled at 30 Nov 14:00:00 UTC by an operator", ("requeue",)),
        ({"state": "cancelled", "finished_at": NOW, "attempt": 1,
          "cancel_requested_at": NOW - timedelta(seconds=2)}, "cancelled",
         "cancelled at 30 Nov 14:00:00 UTC: asked to stop while it ran", ("requeue",)),
        ({"state": "cancelled", "finished_at": NOW, "attempt": 2, "last_error": "E: x"},
         "cancelled", "cancelled at 30 Nov 14:00:00 UTC by an operator, after attempt 2 of 5 had "
         "failed", ("requeue",)),
    ],
)  # fmt: skip
def test_each_state_is_explained(
    overrides: dict[str, Any], label: str, reason: str, actions: tuple[str, ...]
) -> None:
    explanation = explain(job(**overrides))
    assert (explanation.label, explanation.reason, explanation.actions) == (label, reason, actions)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"queue_paused": True, "queue_paused_by": "ana@x.example",
          "queue_paused_at": NOW - timedelta(minutes=5)},
         "waiting: queue paused since 30 Nov 13:55:00 UTC"),
        ({"state": "running", "attempt": 2, "locked_by": "h:1:abc", "started_at": NOW,
          "lease_expires_at": NOW + timedelta(seconds=20)},
         "running: attempt 2 of 5, claimed now, lease until 14:00:20 UTC"),
        ({"state": "running", "attempt": 2, "locked_by": "h:1:abc", "started_at": NOW,
          "lease_expires_at": NOW - timedelta(seconds=20)},
         "claimed by a worker, whose lease expired 20.0 s ago: the sweeper will put it back"),
    ],
)  # fmt: skip
def test_a_reader_who_is_not_an_operator_is_told_no_worker_and_no_admin(
    overrides: dict[str, Any], reason: str
) -> None:
    assert explain(job(**overrides), operator=False).reason == reason
