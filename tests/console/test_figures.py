"""Overview figures from the inspector's rows: rates over the time a window covers, totals."""

from typing import Any

import pytest

from console.figures import overview


class FakeInspector:
    def __init__(self, live: list[dict[str, Any]], outcomes: list[dict[str, Any]]) -> None:
        self.live, self.outcomes = live, outcomes

    def queue_live(self, tenant_id: int | None, queue: str | None = None) -> list[dict[str, Any]]:
        return self.live

    def queue_outcomes(
        self, tenant_id: int | None, queue: str | None = None
    ) -> list[dict[str, Any]]:
        return self.outcomes


def live(queue: str, **values: Any) -> dict[str, Any]:
    row = {"queue": queue, "paused": False, "paused_at": None, "paused_by": None, "available": 0,
           "scheduled": 0, "running": 0, "dead": 0, "oldest_waiting_seconds": None,
           "live_workers": 0, "live_processes": 3}  # fmt: skip
    return row | values


def outcomes(queue: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        f"{o}_{w}m": 0 for o in ("succeeded", "failed", "dead") for w in (1, 5, 60)
    }
    row |= {"queue": queue, "runtime_sum_5m": 0.0, "runtime_max_5m": None, "wait_sum_5m": 0.0,
            "wait_max_5m": None, "into_minute_seconds": 30.0}  # fmt: skip
    return row | values


def test_rates_divide_by_the_minutes_a_window_really_covers() -> None:
    inspector = FakeInspector(
        [live("mail", available=4, oldest_waiting_seconds=12.0), live("sms", available=1)],
        [outcomes("mail", succeeded_1m=15, succeeded_5m=55, dead_5m=11, succeeded_60m=605,
                  runtime_sum_5m=33.0, runtime_max_5m=2.0)],
    )  # fmt: skip
    result = overview(inspector, None)  # type: ignore[arg-type]
    mail, sms = result.queues
    assert mail.rate(1) == pytest.approx(15 / 1.5)  # the last whole minute and half of this one
    assert mail.rate(5) == pytest.approx(66 / 5.5)
    assert mail.error_rate == pytest.approx(11 / 66) and mail.runtime_avg == pytest.approx(0.5)
    assert sms.rate(5) == 0 and sms.error_rate is None and sms.display()["runtime_avg"] == "—"
    totals = result.totals
    assert (totals.available, totals.oldest_waiting_seconds, totals.live_workers) == (5, 12.0, 3)
    assert totals.rate(60) == pytest.approx(605 / 60.5)
    assert totals.display()["available"] == "5"


def test_no_queue_no_figures() -> None:
    result = overview(FakeInspector([], []), None)  # type: ignore[arg-type]
    assert result.queues == [] and result.totals.display()["rate_5m"] == "0.0"
