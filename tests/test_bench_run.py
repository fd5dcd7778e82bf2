"""bench.run's bookkeeping of the floor (bench/floor_system.py): who measures what, and how the
floor's figures are set against the best peer's and Pauta's. Pure logic on recorded figures."""

from typing import Any

from bench.run import (
    FLOOR,
    RELAXED,
    TARGETS,
    TRACED,
    against_floor,
    compare,
    peers_of,
    selected,
)

CHOSEN = [("pauta", "defaults"), ("pauta", "best"), ("pgqueuer", "best"), ("awa", "best"),
          ("pauta-supervisor", "defaults"), (FLOOR, "best")]  # fmt: skip


def target(metric: str) -> Any:
    return next(target for target in TARGETS if target.metric == metric)


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
    results: dict[tuple[str, str, str], dict[str, Any]] = {
        (FLOOR, "best", "enqueue_single"): {"jobs_per_s": 3000.0},
        ("pauta", "best", "enqueue_single"): {"jobs_per_s": 2400.0},
        ("pgqueuer", "best", "enqueue_single"): {"jobs_per_s": 2100.0},
        ("awa", "best", "enqueue_single"): {"jobs_per_s": 1000.0},
    }
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
    results: dict[tuple[str, str, str], dict[str, Any]] = {
        (FLOOR, "best", "pickup_latency"): {"p99_ms": 1.6},
        ("pauta", "best", "pickup_latency"): {"p99_ms": 2.0},
        ("pgqueuer", "best", "pickup_latency"): {"p99_ms": 4.0},
        ("awa", "best", "pickup_latency"): {"p99_ms": 40.0},
    }
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
