"""How figures are written: the same on the page and in its live refresh."""

import pytest

from console import formatting


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "—"), (0.0004, "0 ms"), (0.25, "250 ms"), (1.24, "1.2 s"), (59.94, "59.9 s"),
     (60, "1 min"), (185, "3 min 5 s"), (3600, "1 h"), (7380, "2 h 3 min"),
     (86400 * 3 + 3600 * 4, "3 d 4 h")],
)  # fmt: skip
def test_durations(seconds: float | None, text: str) -> None:
    assert formatting.seconds(seconds) == text


def test_counts_rates_and_percentages() -> None:
    assert formatting.count(1234567) == "1,234,567"
    assert formatting.count(None) == "—"
    assert (formatting.rate(12.345), formatting.rate(1234.5)) == ("12.3", "1,234")
    assert (formatting.percent(0.0213), formatting.percent(None)) == ("2.1 %", "—")


def test_a_count_takes_its_noun_in_the_singular_only_for_one() -> None:
    assert formatting.plural(1, "job") == "1 job"
    assert (formatting.plural(0, "job"), formatting.plural(1200, "job")) == ("0 jobs", "1,200 jobs")
    assert formatting.plural(2, "process", "processes") == "2 processes"
