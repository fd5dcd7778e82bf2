"""How far ahead a consumer claims, as pure logic."""

from jobqueue.runner import Prefetch
from jobqueue.settings import DEFAULT_PREFETCH_BYTES

BUDGET = DEFAULT_PREFETCH_BYTES


def test_nothing_is_prefetched_before_a_job_has_run() -> None:
    assert Prefetch(threads=4, maximum=50, budget=BUDGET).amount() == 0


def test_short_jobs_prefetch_up_to_the_maximum() -> None:
    prefetch = Prefetch(threads=1, maximum=50, budget=BUDGET)
    prefetch.observe_claim(0.001)
    prefetch.observe_runtime(0.00005)
    assert prefetch.amount() == 40  # two claim round trips' worth of 50 µs jobs
    for _ in range(10):
        prefetch.observe_runtime(0.00001)
    assert prefetch.amount() == 50


def test_long_jobs_are_not_prefetched() -> None:
    prefetch = Prefetch(threads=8, maximum=50, budget=BUDGET)
    prefetch.observe_claim(0.002)
    for _ in range(5):
        prefetch.observe_runtime(2.0)
    assert prefetch.amount() == 0


def test_the_estimate_follows_a_change_of_job_length() -> None:
    prefetch = Prefetch(threads=2, maximum=50, budget=BUDGET)
    prefetch.observe_claim(0.001)
    prefetch.observe_runtime(1.0)
    assert prefetch.amount() == 0
    for _ in range(100):
        prefetch.observe_runtime(0.00001)
    assert prefetch.amount() == 50


def test_a_zero_maximum_turns_prefetch_off() -> None:
    prefetch = Prefetch(threads=2, maximum=0, budget=BUDGET)
    prefetch.observe_runtime(0.00001)
    assert prefetch.amount() == 0


def _short_jobs(budget: int) -> Prefetch:
    """Jobs short enough that 500 would be claimed ahead, were it not for their payloads."""
    prefetch = Prefetch(threads=1, maximum=500, budget=budget)
    prefetch.observe_claim(0.001)
    prefetch.observe_runtime(0.000001)
    return prefetch


def test_payloads_bound_how_many_jobs_are_claimed_ahead() -> None:
    prefetch = _short_jobs(budget=1_000_000)
    assert prefetch.amount() == 500
    prefetch.observe_payloads(20.0)
    assert prefetch.amount() == 500  # small payloads: the count binds
    prefetch.observe_payloads(100_000.0)
    assert prefetch.amount() == 10  # a million bytes of 100 kB payloads


def test_bigger_payloads_count_at_once_and_smaller_ones_bring_the_estimate_down_slowly() -> None:
    prefetch = _short_jobs(budget=1_000_000)
    prefetch.observe_payloads(100_000.0)
    prefetch.observe_payloads(100.0)
    assert prefetch.payload_bytes == 80_020.0  # one claim of small payloads: a fifth of the way
    assert prefetch.amount() == 12
    for _ in range(60):
        prefetch.observe_payloads(100.0)
    assert prefetch.amount() == 500
    prefetch.observe_payloads(250_000.0)
    assert prefetch.amount() == 4


def test_a_zero_budget_claims_nothing_ahead_once_a_payload_was_seen() -> None:
    prefetch = _short_jobs(budget=0)
    assert prefetch.amount() == 500  # no payload seen yet (no claim found a job)
    prefetch.observe_payloads(2.0)  # "{}"
    assert prefetch.amount() == 0
