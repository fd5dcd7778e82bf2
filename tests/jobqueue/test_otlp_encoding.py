"""jobqueue.otlp_encoding writes, byte for byte, what the OTLP exporter's own encoder writes
(``encode_spans(spans).SerializePartialToString()``), for spans of every shape the SDK makes:
pure logic, real SDK spans, the official encoder as the reference."""

import math
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans as official
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from devtools.otlp_receiver import Receiver
from jobqueue.otlp_encoding import SpanExporter, encode_spans
from jobqueue.telemetry import _exporters


def provider(
    resource: dict[str, Any] | None = None, limits: SpanLimits | None = None
) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    made = TracerProvider(resource=Resource.create(resource or {}), span_limits=limits)
    made.add_span_processor(SimpleSpanProcessor(exporter))
    return made, exporter


def assert_same_bytes(spans: list[ReadableSpan]) -> None:
    expected = official(spans).SerializePartialToString()
    assert encode_spans(spans) == expected
    # and the official decoder reads it back (a check of the reference itself)
    assert ExportTraceServiceRequest.FromString(encode_spans(spans)) == official(spans)


def test_spans_of_every_shape_encode_as_the_official_encoder_does() -> None:
    made, exporter = provider({"service.name": "pauta-worker", "host.cores": 2})
    tracer = made.get_tracer("pauta.jobqueue", "1.0", schema_url="https://example.test/s")
    other = made.get_tracer("pauta.other")
    remote = SpanContext(
        0x1F2E3D4C5B6A79880123456789ABCDEF,
        0x0123456789ABCDEF,
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "value"), ("other", "x")]),
    )
    consumer = tracer.start_span(
        "process noop",
        context=context.Context(),
        kind=SpanKind.CONSUMER,
        links=[Link(remote, {"link.kind": "enqueued", "n": -3})],
        attributes={
            "messaging.system": "pauta",
            "messaging.message.id": "123",
            "pauta.job.attempt": 1,
            "pauta.tenant.id": 0,
            "negative": -(2**63),
            "large": 2**63 - 1,
            "ratio": 0.25,
            "zero": 0.0,
            "infinite": math.inf,
            "flag": False,
            "on": True,
            "empty": "",
            "names": ("a", "b"),
            "numbers": [1, 2, 3],
            "": "keyless",
            "accents": "avaliação 360°",
        },
    )
    try:
        raise ValueError("boom \x00 and more")
    except ValueError as error:
        consumer.record_exception(error)
    consumer.set_status(Status(StatusCode.ERROR, "ValueError: boom"))
    consumer.end()
    with tracer.start_as_current_span("parent", kind=SpanKind.SERVER) as parent:
        parent.set_status(Status(StatusCode.OK))
        with other.start_as_current_span("", kind=SpanKind.CLIENT):
            pass
    child_of_remote = tracer.start_span(
        "child of a remote", context=trace.set_span_in_context(trace.NonRecordingSpan(remote))
    )
    child_of_remote.add_event("an event", {"k": "v"})
    child_of_remote.end()
    spans = list(exporter.get_finished_spans())
    second, second_exporter = provider({"service.name": "pauta-web"})
    second.get_tracer("t").start_span("producer", kind=SpanKind.PRODUCER).end()
    spans += second_exporter.get_finished_spans()
    assert len(spans) == 5
    assert_same_bytes(spans)
    assert_same_bytes([])


def test_dropped_attributes_events_and_links_are_counted_as_the_official_encoder_does() -> None:
    made, exporter = provider(limits=SpanLimits(max_attributes=2, max_events=1, max_links=1))
    span = made.get_tracer("t").start_span(
        "limited",
        attributes={"a": 1, "b": 2, "c": 3},
        links=[Link(SpanContext(1, 2, False), {}), Link(SpanContext(3, 4, False), {})],
    )
    span.add_event("one")
    span.add_event("two")
    span.end()
    [finished] = exporter.get_finished_spans()
    assert (finished.dropped_attributes, finished.dropped_events, finished.dropped_links) == (
        1,
        1,
        1,
    )
    assert_same_bytes([finished])


values = st.one_of(
    st.text(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(max_size=20),
    attributes=st.dictionaries(st.text(max_size=10), values, max_size=6),
    kind=st.sampled_from(list(SpanKind)),
    description=st.none() | st.text(max_size=10),
)
def test_any_span_encodes_as_the_official_encoder_does(
    name: str, attributes: dict[str, Any], kind: SpanKind, description: str | None
) -> None:
    made, exporter = provider()
    span = made.get_tracer("t").start_span(name, kind=kind, attributes=attributes)
    if description is not None:
        span.set_status(Status(StatusCode.ERROR, description))
    span.end()
    assert_same_bytes(list(exporter.get_finished_spans()))


def test_the_worker_exports_spans_over_http_with_this_encoder_to_a_real_receiver(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """telemetry's exporter for http/protobuf (the default) is SpanExporter, and what it sends
    a real OTLP/HTTP receiver decodes."""
    receiver = Receiver().start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        span_exporter, _ = _exporters(os.environ)
        assert isinstance(span_exporter, SpanExporter)
        made = TracerProvider(resource=Resource.create({"service.name": "pauta-worker"}))
        made.add_span_processor(SimpleSpanProcessor(span_exporter))
        attributes = {"pauta.task": "noop", "pauta.job.attempt": 2, "messaging.message.id": "7"}
        made.get_tracer("pauta.jobqueue").start_span(
            "process noop", kind=SpanKind.CONSUMER, attributes=attributes
        ).end()
        made.shutdown()
        [received] = receiver.spans_named("process noop")
    finally:
        receiver.stop()
    assert (received.service, received.kind, received.attributes) == (
        "pauta-worker",
        SpanKind.CONSUMER.value + 1,  # the protocol's numbering: 0 is "unspecified"
        attributes,
    )


def test_an_attribute_that_cannot_be_encoded_is_left_out_as_the_official_encoder_does() -> None:
    """Text with a lone surrogate has no UTF-8: the official encoder logs it and drops that
    attribute alone; the span and the batch go on."""
    made, exporter = provider()
    made.get_tracer("t").start_span("x", attributes={"bad": "b\ud800", "ok": 1}).end()
    spans = list(exporter.get_finished_spans())
    assert_same_bytes(spans)
    assert len(ExportTraceServiceRequest.FromString(encode_spans(spans)).resource_spans) == 1
