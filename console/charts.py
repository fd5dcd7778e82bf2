"""The queue graphs' data: outcomes, run and wait times, and depth, bucketed over a window.

Outcomes are given per minute whatever the bucket (a 15-minute bucket's count divided by 15), so
the throughput axis reads the same in every window. Depth buckets hold the largest depth sampled
in them; a bucket with no sample is null and the line skips it.
"""

from dataclasses import dataclass
from typing import Any

from flask_babel import format_datetime

from jobqueue.inspect import JobInspector, Row


@dataclass(frozen=True, slots=True)
class Window:
    name: str
    seconds: int
    bucket_seconds: int
    label_format: str  # a Babel pattern, in the reader's time zone and language


WINDOWS = {
    window.name: window
    for window in (
        Window("1h", 3600, 60, "HH:mm"),
        Window("6h", 6 * 3600, 5 * 60, "HH:mm"),
        Window("24h", 24 * 3600, 15 * 60, "HH:mm"),
        Window("7d", 7 * 86400, 2 * 3600, "EEE HH:mm"),
    )
}
DEFAULT_WINDOW = "1h"


def series(
    inspector: JobInspector, queue: str | None, tenant_id: int | None, window: Window
) -> dict[str, Any]:
    """Everything the three graphs of a queue (or of all queues, ``queue=None``) draw."""
    stats = inspector.stats_series(queue, tenant_id, window.seconds, window.bucket_seconds)
    depth = {
        row["bucket"]: row
        for row in inspector.depth_series(queue, tenant_id, window.seconds, window.bucket_seconds)
    }
    per_minute = window.bucket_seconds / 60
    return {
        "window": window.name,
        "bucket_seconds": window.bucket_seconds,
        "labels": [format_datetime(row["bucket"], window.label_format) for row in stats],
        "throughput": {
            outcome: [round(row[outcome] / per_minute, 3) for row in stats]
            for outcome in ("succeeded", "failed", "dead")
        },
        "timing": {
            name: [_rounded(row[name]) for row in stats]
            for name in ("runtime_avg", "runtime_max", "wait_avg", "wait_max")
        },
        "depth": {
            state: [_depth(depth.get(row["bucket"]), state) for row in stats]
            for state in ("available", "scheduled", "running", "dead")
        },
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _depth(row: Row | None, state: str) -> int | None:
    return None if row is None or row[state] is None else int(row[state])
