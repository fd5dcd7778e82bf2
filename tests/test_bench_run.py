"""bench.run's bookkeeping of the floor (bench/floor_system.py): who measures what, and how the
floor's figures are set against the best peer's and Pauta's. Pure logic on recorded figures."""

import time
from typing import Any

import pytest

from bench.peers._common import enqueue_each_paced
from bench.run import (
    FLOOR,
    RELAXED,
    TARGETS,
    TRACED,
    against_floor,
    compare,
    entries,
    peers_of,
    selected,
)

CHOSEN = [("pauta", "defaults"), ("pauta", "best"), ("pgqueuer", "best"), ("awa", "best"),
          ("pauta-supervisor", "defaults"), (FLOOR, "best")]  # fmt: skip


def target(metric: str) -> Any:
    return next(target for target in TARGETS if target.metric == metric)


def best(metric: str, field: str, **figures: float) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Recorded figures of the best profiles, by system (``floor`` for the floor)."""
    return {(name, "best", metric): {field: value} for name, value in figures.items()}


def test_the_floor_is_measured_for_enqueue_and_pickup_only_and_is_never_a_peer() -> None:
    traced = [("pauta", "defaults")]
    for metric in ("enqueue_single", "enqueue_bulk", "pickup_latency"):
        assert (FLOOR, "best") in selected(metric, CHOSEN, traced)
    for metric in ("drain c=10", RELAXED, TRACED):
        assert (FLOOR, "best") not in selected(metric, CHOSEN, traced)
    assert selected(RELAXED, CHOSEN, traced) == [("pauta", "best"), ("pgqueuer", "best"),
                                                   ("awa", "best")]  # fmt: skip
    assert peers_of(CHOSEN) == ["awa", "pgqueuer"]


def test_the_floor_is_set_against_the_best_peer_and_pauta_against_the_floor() -> None:
    results = best("enqueue_single", "jobs_per_s", floor=3000, pauta=2400, pgqueuer=2100, awa=1000)
    record = against_floor(target("enqueue_single"), results, ["awa", "pgqueuer"])
    assert record["best_peer"] == "pgqueuer"
    assert record["floor_over_best_peer"] == round(3000 / 2100, 2)  # 1.43: under 1.5x
    assert record["floor_meets_goal"] is False
    assert record["pauta_share_of_floor"] == 0.8
    # the floor is no peer: Pauta's own comparison is with PGQueuer, not with the faster floor
    assert compare(target("enqueue_single"), "best", results, ["awa", "pgqueuer"])["ratio"] == (
        round(2400 / 2100, 2)
    )
    results[(FLOOR, "best", "enqueue_single")] = {"jobs_per_s": 3150.0}
    again = against_floor(target("enqueue_single"), results, ["awa", "pgqueuer"])
    assert again["floor_meets_goal"] is True  # 1.5x


def test_a_latency_floor_meets_its_goal_only_under_the_ceiling_as_well() -> None:
    results = best("pickup_latency", "p99_ms", floor=1.6, pauta=2.0, pgqueuer=4.0, awa=40.0)
    record = against_floor(target("pickup_latency"), results, ["awa", "pgqueuer"])
    assert record["best_peer"] == "pgqueuer"  # the lowest latency
    assert record["floor_over_best_peer"] == 2.5  # the peer's over the floor's
    assert record["floor_meets_goal"] is False  # 2.5x, but not under 1.5 ms
    assert record["pauta_share_of_floor"] == 0.8  # the floor's over Pauta's
    results[(FLOOR, "best", "pickup_latency")] = {"p99_ms": 1.4}
    again = against_floor(target("pickup_latency"), results, ["awa", "pgqueuer"])
    assert again["floor_meets_goal"] is True  # 2.9x and under 1.5 ms


def test_a_floor_not_measured_says_so() -> None:
    assert against_floor(target("enqueue_bulk"), {}, ["pgqueuer"]) == {
        "floor": "enqueue_bulk",
        "profile": "best",
        "field": "jobs_per_s",
        "verdict": "not measured",
    }


def test_the_floor_has_one_profile_and_a_spec_that_names_nothing_is_refused() -> None:
    assert entries("floor") == [(FLOOR, "best")]
    with pytest.raises(ValueError, match="floor has no profile 'defaults'; it has best"):
        entries("floor:defaults")
    with pytest.raises(ValueError, match="--systems names no system; choose from pauta, "):
        entries(" , ,")


def test_paced_enqueues_go_in_order_one_interval_apart_each_stamped_on_return() -> None:
    entered: dict[int, float] = {}

    def enqueue_one(seq: int) -> None:  # an enqueue that takes 2 ms
        entered[seq] = time.time()
        time.sleep(0.002)

    run = enqueue_each_paced(enqueue_one, range(5), 0.01)
    assert list(entered) == [0, 1, 2, 3, 4]
    assert len(run.stamps) == 5
    # a pickup is timed from the enqueue's return, so each stamp comes after its call
    assert all(run.stamps[seq] >= entered[seq] + 0.002 for seq in range(5))
    assert run.elapsed >= 0.04  # four waits between five starts 10 ms apart
    assert entered[4] - entered[0] >= 0.039
