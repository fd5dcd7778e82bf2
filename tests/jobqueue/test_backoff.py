"""The retry schedule, as pure logic with a fake random source."""

import pytest

from jobqueue.backoff import RetryPolicy


def test_ceilings_grow_exponentially_until_the_cap() -> None:
    policy = RetryPolicy(base_seconds=10, factor=2, cap_seconds=300)
    assert [policy.ceiling(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


def test_full_jitter_spans_zero_to_the_ceiling() -> None:
    low = RetryPolicy(base_seconds=10, rng=lambda: 0.0)
    high = RetryPolicy(base_seconds=10, rng=lambda: 1.0)
    middle = RetryPolicy(base_seconds=10, rng=lambda: 0.25)
    assert low.delay(3) == 0.0
    assert high.delay(3) == 40.0
    assert middle.delay(3) == 10.0


def test_real_jitter_stays_within_bounds_and_its_average_grows() -> None:
    policy = RetryPolicy(base_seconds=1, factor=2, cap_seconds=30)
    averages = []
    for attempt in range(1, 7):
        samples = [policy.delay(attempt) for _ in range(2000)]
        assert all(0 <= sample <= policy.ceiling(attempt) for sample in samples)
        averages.append(sum(samples) / len(samples))
    assert averages == sorted(averages)
    assert averages[-1] <= 30


@pytest.mark.parametrize("factor", [2, 10, 1000])
@pytest.mark.parametrize("attempt", [104, 310, 1025, 1_000_000])
def test_huge_attempt_numbers_do_not_overflow(factor: float, attempt: int) -> None:
    policy = RetryPolicy(factor=factor, cap_seconds=300, rng=lambda: 1.0)
    assert policy.ceiling(attempt) == 300
    assert policy.delay(attempt) == 300


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 2_000_000}, "max_attempts"),
        ({"base_seconds": -1}, "base_seconds must be between 0 and"),
        ({"cap_seconds": float("inf")}, "cap_seconds must be between 0 and"),
        ({"cap_seconds": float("nan")}, "cap_seconds must be between 0 and"),
        ({"factor": 0.5}, "factor"),
    ],
)
def test_bad_policies_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RetryPolicy(**options)  # type: ignore[arg-type]
