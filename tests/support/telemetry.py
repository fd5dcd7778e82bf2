"""In-memory OpenTelemetry for tests: spans and metrics kept in this process, not exported.

OpenTelemetry's global providers can be set once per process, so the first test that asks for
them installs them for the rest of the run; each test starts from an empty span list.
"""

from dataclasses import dataclass
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jobqueue import telemetry


class MemoryReader(telemetry.JobTimesReader, InMemoryMetricReader):
    """The in-memory reader, with the engine's job histograms as configure's reader has them."""


@dataclass
class MemoryTelemetry:
    spans: InMemorySpanExporter
    metrics: MemoryReader

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        return [s for s in self.spans.get_finished_spans() if name is None or s.name == name]

    def metric_points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """(attributes, point) of every data point of metric ``name`` collected now."""
        data = self.metrics.get_metrics_data()
        points = []
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        points += [(dict(p.attributes or {}), p) for p in metric.data.data_points]
        return points


_installed: MemoryTelemetry | None = None


def memory_telemetry() -> MemoryTelemetry:
    global _installed
    if _installed is None:
        spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(tracer_provider)
        reader = MemoryReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _installed = MemoryTelemetry(spans, reader)
    telemetry.mark_active_for_tests()
    _installed.spans.clear()
    return _installed
