"""How figures are written: the same on the page and in its live refresh."""

from typing import Any

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


def test_numbers_and_relative_times_follow_the_readers_language(app: Any) -> None:
    from datetime import UTC, datetime, timedelta

    from flask_babel import force_locale

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    with app.test_request_context():
        with force_locale("pt_BR"):
            assert formatting.count(1234567) == "1.234.567"
            assert (formatting.rate(12.345), formatting.percent(0.0213)) == ("12,3", "2,1 %")
            assert formatting.seconds(1.24) == "1,2 s"
            assert formatting.relative(now - timedelta(minutes=3), now) == "há 3 min"
            assert formatting.relative(now + timedelta(seconds=185), now) == "em 3 min 5 s"
        with force_locale("en"):
            assert formatting.relative(now - timedelta(minutes=3), now) == "3 min ago"
