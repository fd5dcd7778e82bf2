"""jobqueue.telemetry.JobTimes: the run and wait histograms the engine aggregates itself reach a
reader as the SDK's own histograms would, point for point, cumulative or delta. Pure logic
against real SDK meter providers and in-memory readers."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader

from jobqueue import telemetry

NAMES = (telemetry.JobTimes.RUN[0], telemetry.JobTimes.WAIT[0])

# values around and on the bounds (a value on a bound belongs to that bound's bucket), below
# zero (left out), and far above the last bound
seconds = st.one_of(
    st.sampled_from([*telemetry.DURATION_BUCKETS, 0.0, -0.001, 7200.0]),
    st.floats(min_value=-1.0, max_value=5000.0, allow_nan=False),
)
attempts = st.lists(
    st.tuples(st.sampled_from(["default", "mail"]), st.sampled_from(["a", "b"]), seconds, seconds),
    max_size=40,
)


class Readers:
    """An SDK histogram pair and a JobTimes fed the same values, each read by its own reader
    preferring ``temporality`` for histograms."""

    def __init__(self, temporality: AggregationTemporality) -> None:
        preferred = {Histogram: temporality}
        self.sdk_reader = InMemoryMetricReader(preferred_temporality=preferred)
        meter = MeterProvider(metric_readers=[self.sdk_reader]).get_meter("sdk")
        self.sdk = [
            meter.create_histogram(
                name, unit="s", explicit_bucket_boundaries_advisory=telemetry.DURATION_BUCKETS
            )
            for name in NAMES
        ]
        times = telemetry.JobTimes()

        class Reader(telemetry.JobTimesReader, InMemoryMetricReader):
            job_times = times

        self.times = times
        self.engine_reader = Reader(preferred_temporality=preferred)
        engine_meter = MeterProvider(metric_readers=[self.engine_reader]).get_meter("engine")
        # the SDK delivers a collection only when it holds something: the runner's counter
        self.counter = engine_meter.create_counter("pauta.jobs.processed")

    def record(self, queue: str, task: str, run: float, wait: float) -> None:
        self.record_batch([(queue, task, run, wait)])

    def record_batch(self, batch: list[tuple[str, str, float, float]]) -> None:
        """The SDK's histograms take the attempts one by one, the engine's together."""
        for queue, task, run, wait in batch:
            labels = {"queue": queue, "task": task}
            self.sdk[0].record(run, labels)
            self.sdk[1].record(wait, labels)
            self.counter.add(1, labels)
        self.times.record(batch)

    def points(self) -> tuple[dict[Any, Any], dict[Any, Any]]:
        return _points(self.sdk_reader), _points(self.engine_reader)


def _points(reader: InMemoryMetricReader) -> dict[Any, Any]:
    """Each histogram point's fields but its times, by name and labels; and its temporality."""
    found: dict[Any, Any] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name not in NAMES:
                    continue
                for point in metric.data.data_points:
                    labels = tuple(sorted(point.attributes.items()))
                    found[metric.name, labels] = (
                        metric.unit,
                        metric.data.aggregation_temporality,
                        point.count,
                        pytest.approx(point.sum),
                        tuple(point.bucket_counts),
                        tuple(point.explicit_bounds),
                        point.min,
                        point.max,
                    )
    return found


@pytest.mark.parametrize(
    "temporality", [AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA]
)
@settings(max_examples=150, deadline=None)
@given(
    first=attempts, second=attempts, batch=st.integers(1, 40), fold_at=st.sampled_from([1, 3, 1024])
)
def test_engine_histograms_read_as_the_sdks_own(
    temporality: AggregationTemporality, first: Any, second: Any, batch: int, fold_at: int
) -> None:
    """Cumulative, or delta: each collection holds what came since the one before, and nothing
    for a series that took no value meanwhile; whether the attempts come one by one or in
    batches, and whether their values are folded into the buckets as they come, a few at a
    time or at the collection.
    kills: job-times-bucket-by-bisect-right, job-times-negative-kept,
    job-times-delta-not-restarted, job-times-fold-forgets-the-last-bucket,
    job-times-pending-lost-at-fold, job-times-fold-keeps-the-old-least,
    job-times-collected-unfolded"""
    readers = Readers(temporality)
    folded_at = telemetry._Series.FOLD_AT
    telemetry._Series.FOLD_AT = fold_at
    try:
        for collection in (first, second):
            for start in range(0, len(collection), batch):
                readers.record_batch(collection[start : start + batch])
            sdk, engine = readers.points()
            assert engine == sdk
    finally:
        telemetry._Series.FOLD_AT = folded_at


def test_a_delta_point_starts_where_the_last_collection_ended() -> None:
    readers = Readers(AggregationTemporality.DELTA)
    readers.record("default", "a", 0.2, 0.01)
    first = readers.engine_reader.get_metrics_data()
    readers.record("default", "a", 0.3, 0.02)
    second = readers.engine_reader.get_metrics_data()
    [one] = _histogram_points(first, NAMES[0])
    [two] = _histogram_points(second, NAMES[0])
    assert one.time_unix_nano <= two.start_time_unix_nano < two.time_unix_nano
    assert (one.count, two.count) == (1, 1)


def test_the_histograms_join_the_engines_scope_beside_its_counter() -> None:
    """In the engine's scope when the collection has one (the runner's counter), in a scope of
    that name of their own when it has not."""
    times = telemetry.JobTimes()

    class Reader(telemetry.JobTimesReader, InMemoryMetricReader):
        job_times = times

    reader = Reader()
    provider = MeterProvider(metric_readers=[reader])
    provider.get_meter("elsewhere").create_counter("other").add(1)
    times.record([("default", "a", 0.2, 0.01)])
    assert _metrics_by_scope(reader) == {"elsewhere": ["other"], telemetry.METER_NAME: [*NAMES]}
    provider.get_meter(telemetry.METER_NAME).create_counter("pauta.jobs.processed").add(1)
    assert _metrics_by_scope(reader) == {
        "elsewhere": ["other"],
        telemetry.METER_NAME: ["pauta.jobs.processed", *NAMES],
    }


def _metrics_by_scope(reader: InMemoryMetricReader) -> dict[str, list[str]]:
    data = reader.get_metrics_data()
    assert data is not None
    [resource] = data.resource_metrics
    return {
        scope.scope.name: [metric.name for metric in scope.metrics]
        for scope in resource.scope_metrics
    }


def _histogram_points(data: Any, name: str) -> list[Any]:
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]
