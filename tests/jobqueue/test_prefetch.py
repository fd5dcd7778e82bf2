"""How far ahead a consumer claims, as pure logic."""

from jobqueue.runner import Prefetch


def test_nothing_is_prefetched_before_a_job_has_run() -> None:
    assert Prefetch(threads=4, maximum=50).amount() == 0


def test_short_jobs_prefetch_up_to_the_maximum() -> None:
    prefetch = Prefetch(threads=1, maximum=50)
    prefetch.observe_claim(0.001)
    prefetch.observe_runtime(0.00005)
    assert prefetch.amount() == 40  # two claim round trips' worth of 50 µs jobs
    for _ in range(10):
        prefetch.observe_runtime(0.00001)
    assert prefetch.amount() == 50


def test_long_jobs_are_not_prefetched() -> None:
    prefetch = Prefetch(threads=8, maximum=50)
    prefetch.observe_claim(0.002)
    for _ in range(5):
        prefetch.observe_runtime(2.0)
    assert prefetch.amount() == 0


def test_the_estimate_follows_a_change_of_job_length() -> None:
    prefetch = Prefetch(threads=2, maximum=50)
    prefetch.observe_claim(0.001)
    prefetch.observe_runtime(1.0)
    assert prefetch.amount() == 0
    for _ in range(100):
        prefetch.observe_runtime(0.00001)
    assert prefetch.amount() == 50


def test_a_zero_maximum_turns_prefetch_off() -> None:
    prefetch = Prefetch(threads=2, maximum=0)
    prefetch.observe_runtime(0.00001)
    assert prefetch.amount() == 0
