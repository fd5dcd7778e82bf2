"""jobqueue.attempt_span.DeferredSpan and jobqueue.attempt_export: an attempt's span kept as
plain values until something changes it reaches the collector as the SDK's span would have,
field for field, whatever the task does with it, and exactly once: through the engine's own
exporter while unchanged, through the tracer's processors once changed. Real SDK tracers and
exporters, a real OTLP receiver on loopback, and real worker processes."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry import context
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, Tracer
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, StatusCode, TraceFlags, TraceState

from devtools.otlp_receiver import Receiver
from jobqueue import JobRequest, enqueue_many
from jobqueue.attempt_export import ENCODE_BATCH, AttemptSpanSink
from jobqueue.attempt_span import AttemptSpan, DeferredSpan, RootSpans
from jobqueue.otlp_encoding import SpanExporter, encode_scope_spans, encode_unchanged
from tests.jobqueue.test_attempt_span import ACTIONS, ENQUEUED, act, provider
from tests.support.processes import WorkerProcess, start_worker, wait_until

LEADING: dict[str, Any] = {
    "messaging.system": "pauta",
    "messaging.destination.name": "a-queue-with-a-long-name",
    "pauta.tenant.id": 7,
}
REST: dict[str, Any] = {"messaging.message.id": "42", "pauta.job.attempt": 2}


class ListSink:
    """A sink that keeps what it is given (pure logic: the encoding is checked separately)."""

    def __init__(self) -> None:
        self.spans: list[DeferredSpan] = []

    def add(self, span: DeferredSpan) -> None:
        self.spans.append(span)

    def serves(self, tracer: Tracer) -> bool:
        return True


def deferred_span(tracer: Any, links: list[Link], sink: ListSink) -> Any:
    return RootSpans(tracer, sink).start(
        "process send_mail", SpanKind.CONSUMER, dict(REST), links, LEADING
    )


def sent(span: ReadableSpan | DeferredSpan, resource: Resource) -> Any:
    """The span as a collector decodes it, without its ids and times."""
    if isinstance(span, DeferredSpan):
        scope = span.tracer._instrumentation_scope
        body = encode_scope_spans(resource, scope, [encode_unchanged(span)])
        request = ExportTraceServiceRequest.FromString(body)
    else:
        request = encode_spans([span])
    [resource_spans] = request.resource_spans
    [scope_spans] = resource_spans.scope_spans
    [decoded] = scope_spans.spans
    decoded.ClearField("trace_id")
    decoded.ClearField("span_id")
    decoded.ClearField("start_time_unix_nano")
    decoded.ClearField("end_time_unix_nano")
    return (resource_spans.resource, scope_spans.scope, decoded)


@settings(max_examples=300, deadline=None)
@example(actions=[], linked=True, max_attributes=9, max_length=None, max_links=2)
@example(actions=[("end",)], linked=False, max_attributes=5, max_length=None, max_links=0)
@given(
    actions=ACTIONS,
    linked=st.booleans(),
    max_attributes=st.integers(0, 9),
    max_length=st.sampled_from([None, None, 0, 6]),
    max_links=st.integers(0, 2),
)
def test_a_deferred_span_sends_what_the_sdk_span_would_whatever_the_task_does(
    actions: list[tuple[Any, ...]],
    linked: bool,
    max_attributes: int,
    max_length: int | None,
    max_links: int,
) -> None:
    """Unchanged, it goes to the sink only; changed, to the processors only, and either way the
    collector decodes what it would have decoded of the SDK's span.
    kills: deferred-span-change-dropped, deferred-encoding-kind, deferred-encoding-rest-attributes,
    deferred-span-sent-twice"""
    limits = SpanLimits(
        max_span_attributes=max_attributes,
        max_events=2,
        max_links=max_links,
        max_event_attributes=2,
        max_attribute_length=max_length,
    )
    links = [Link(ENQUEUED)] if linked else []
    made, exporter = provider(limits=limits)
    span = sdk_attributes_first(made.get_tracer("pauta.jobqueue"), links)
    act(span, actions)
    span.end()
    [expected] = exporter.get_finished_spans()

    made, exporter = provider(limits=limits)
    sink = ListSink()
    span = deferred_span(made.get_tracer("pauta.jobqueue"), links, sink)
    act(span, actions)
    span.end()
    finished = list(exporter.get_finished_spans()) + sink.spans
    assert len(finished) == 1
    assert sent(finished[0], made.resource) == sent(expected, made.resource)


link_shapes = st.builds(
    lambda trace_id, span_id, remote, state, attributes: Link(
        SpanContext(trace_id, span_id, remote, TraceFlags(1), TraceState(state)), attributes
    ),
    st.sampled_from([0, 0xABC, 2**128 - 1]),
    st.sampled_from([0, 0xDEF, 2**64 - 1]),
    st.booleans(),
    st.sampled_from([[], [("vendor", "value")]]),
    st.sampled_from([None, {}, {"link.kind": "enqueued"}]),
)
rest_values = st.one_of(
    st.text(max_size=300),
    st.text(alphabet="ab", min_size=120, max_size=132),  # either side of one byte's length
    st.integers(-(2**63), 2**63 - 1),
    st.integers(120, 135),
    st.floats(allow_nan=False),
    st.booleans(),
)


CONSUMER = SpanKind.CONSUMER
LONG_KEY = "pauta.a-key-long-enough-that-its-pair-with-a-short-text-takes-two-bytes-of-length"


@settings(max_examples=300, deadline=None)
@example(message_id="x" * 125, attempt=127, links=[Link(ENQUEUED)], key=LONG_KEY, kind=CONSUMER)
@example(message_id="x" * 126, attempt=128, links=[Link(ENQUEUED)], key=LONG_KEY, kind=CONSUMER)
@example(message_id="é", attempt=-1, links=[Link(SpanContext(0, 0, True))], key="k", kind=CONSUMER)
@example(message_id="a", attempt=0, links=[], key="pauta.job.attempt", kind=SpanKind.INTERNAL)
@example(message_id="b", attempt=5, links=[], key="pauta.job.attempt", kind=CONSUMER)
@given(
    message_id=rest_values,
    attempt=rest_values,
    links=st.lists(link_shapes, max_size=3),
    key=st.sampled_from(["pauta.job.attempt", LONG_KEY, "k"]) | st.text(min_size=1, max_size=200),
    kind=st.sampled_from(list(SpanKind)),
)
def test_an_unchanged_span_encodes_its_own_attributes_and_links_as_the_official_encoder_does(
    message_id: Any, attempt: Any, links: list[Link], key: str, kind: SpanKind
) -> None:
    """The attributes after the shared leading ones (whatever their keys and values hold), the
    links and the span's kind, as the SDK's span reaches the collector; one name with one kind
    after another, and one small whole number after another.
    kills: deferred-encoding-rest-attributes, deferred-encoding-short-text,
    deferred-encoding-link-length, deferred-encoding-invalid-link-kept,
    deferred-encoding-link-flags, deferred-encoding-name-kept-for-another-kind,
    deferred-encoding-small-int-kept-for-another, deferred-encoding-long-pair"""
    if key == "messaging.message.id" or key in LEADING:
        key = f"{key}.own"  # the attributes after the leading ones have keys of their own
    rest = {"messaging.message.id": message_id, key: attempt}
    made, exporter = provider()
    tracer = made.get_tracer("pauta.jobqueue")
    tracer.start_span(
        "process send_mail",
        context=context.Context(),
        kind=kind,
        links=links,
        attributes={**LEADING, **rest},
    ).end()
    [expected] = exporter.get_finished_spans()
    sink = ListSink()
    RootSpans(tracer, sink).start("process send_mail", kind, dict(rest), links, LEADING).end()
    [unchanged] = sink.spans
    assert sent(unchanged, made.resource) == sent(expected, made.resource)


def test_an_unchanged_spans_bytes_are_canonical_and_the_sdk_spans_at_every_length() -> None:
    """A span's length is written in one byte, two, or more as its size asks (an attempt's is
    two bytes, written apart): at each size across those bounds, without attributes, with
    the usual ones, and with a message id of up to 17,000 characters, the request of the span
    is the canonical one (decoded and written again by protobuf, the same bytes) and decodes
    to what the SDK's span sends.
    kills: deferred-encoding-two-byte-length-below-its-range,
    deferred-encoding-two-byte-length-above-its-range"""
    made, exporter = provider()
    tracer = made.get_tracer("pauta.jobqueue")
    scope = tracer._instrumentation_scope  # type: ignore[attr-defined]
    shapes: list[tuple[dict[str, Any] | None, dict[str, Any]]] = [(None, {})]
    lengths = [*range(0, 200), *range(16_200, 16_500), 17_000]
    shapes += [
        (LEADING, {"messaging.message.id": "x" * n, "pauta.job.attempt": 2}) for n in lengths
    ]
    sizes = set()
    for leading, own in shapes:
        sink = ListSink()
        RootSpans(tracer, sink).start(
            "process send_mail", SpanKind.CONSUMER, dict(own), [], leading
        ).end()
        [unchanged] = sink.spans
        span_field = encode_unchanged(unchanged)
        sizes.add(len(span_field))
        body = encode_scope_spans(made.resource, scope, [span_field])
        assert ExportTraceServiceRequest.FromString(body).SerializeToString() == body, len(
            span_field
        )
        tracer.start_span(
            "process send_mail",
            context=context.Context(),
            kind=SpanKind.CONSUMER,
            attributes={**(leading or {}), **own},
        ).end()
        [expected] = exporter.get_finished_spans()
        exporter.clear()
        assert sent(unchanged, made.resource) == sent(expected, made.resource)
    assert min(sizes) < 0x80 + 2 and max(sizes) > 0x4000 + 3  # one, two and three bytes of length


def sdk_attributes_first(tracer: Any, links: list[Link]) -> Any:
    """The SDK's span with the deferred span's attributes, in their order."""
    return tracer.start_span(
        "process send_mail",
        context=context.Context(),
        kind=SpanKind.CONSUMER,
        links=links,
        attributes={**LEADING, **REST},
    )


def test_an_unchanged_span_goes_to_the_sink_and_a_changed_one_to_the_processors() -> None:
    made, exporter = provider()
    tracer = made.get_tracer("pauta.jobqueue")
    sink = ListSink()
    quiet = deferred_span(tracer, [], sink)
    assert isinstance(quiet, DeferredSpan) and quiet.is_recording()
    quiet.end()
    assert sink.spans == [quiet] and exporter.get_finished_spans() == ()
    assert not quiet.is_recording()
    quiet.set_attribute("late", 1)  # ended: refused, as the SDK's span refuses it
    quiet.end()
    assert sink.spans == [quiet] and "late" not in quiet.attributes

    tagged = deferred_span(tracer, [Link(ENQUEUED)], sink)
    started = tagged.start_time
    tagged.set_attribute("test.tag", "x")
    tagged.set_status(StatusCode.ERROR, "broken")
    tagged.end()
    [exported] = exporter.get_finished_spans()
    assert sink.spans == [quiet]
    assert exported.context == tagged.get_span_context() and exported.start_time == started
    assert exported.attributes["test.tag"] == "x" and exported.status.description == "broken"
    assert [link.context for link in exported.links] == [ENQUEUED]


def test_a_span_starts_deferred_only_while_the_sink_serves_the_tracer_and_no_limit_cuts_it() -> (
    None
):
    """A processor added after configure (to see every span) turns deferred spans off; so do
    limits that would cut the attempt's attributes (the shared leading ones counted), its
    text or its link.
    kills: deferred-span-limit-counts-its-own-only, deferred-span-ignores-the-length-limit,
    deferred-span-ignores-the-link-limit"""

    def started(
        limits: SpanLimits | None, add_processor: bool = False, links: list[Link] | None = None
    ) -> Any:
        made, _ = provider() if limits is None else provider(limits=limits)
        sink = AttemptSpanSink(
            made, SpanExporter(endpoint="http://127.0.0.1:9/v1/traces"), made.resource, SCOPE
        )
        try:
            if add_processor:
                made.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
            return deferred_span(made.get_tracer("pauta.jobqueue"), links or [], sink)
        finally:
            sink.shutdown()

    every = len(LEADING) + len(REST)
    assert isinstance(started(None), DeferredSpan)
    assert isinstance(started(None, add_processor=True), AttemptSpan)
    assert isinstance(started(SpanLimits(max_span_attributes=every)), DeferredSpan)
    assert isinstance(started(SpanLimits(max_span_attributes=every - 1)), AttemptSpan)
    assert isinstance(started(SpanLimits(max_links=0)), DeferredSpan)  # it has no links
    assert isinstance(started(SpanLimits(max_links=1), links=[Link(ENQUEUED)]), DeferredSpan)
    assert isinstance(started(SpanLimits(max_links=0), links=[Link(ENQUEUED)]), AttemptSpan)
    assert isinstance(started(SpanLimits(max_attribute_length=100)), AttemptSpan)


SCOPE = InstrumentationScope("pauta.jobqueue")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


def test_the_sink_sends_every_span_in_batches_drops_past_its_bound_and_sends_the_rest_at_shutdown(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kills: sink-unbounded, sink-shutdown-drops-the-rest"""
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "6")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")  # no timed sends in this test
    made, _ = provider()
    tracer = made.get_tracer("pauta.jobqueue")
    traces = SpanExporter(endpoint=f"{receiver.endpoint}/v1/traces")
    sink = AttemptSpanSink(made, traces, made.resource, SCOPE, quiet=None)  # nor sends on a lull
    names = iter(f"process t{n}" for n in range(100))

    def end_one() -> None:
        span = RootSpans(tracer, sink).start(
            next(names), SpanKind.CONSUMER, dict(REST), [], LEADING
        )
        span.end()

    try:
        for _ in range(5):  # a full batch goes at once; the fifth waits for the delay
            end_one()
        wait_until(lambda: len(receiver.spans) == 4, timeout=10)
        with sink._sending:  # the thread cannot send: what comes past the bound is dropped
            for _ in range(8):
                end_one()
            assert sink.dropped == 3  # 1 + 5 wait, the bound is 6
        wait_until(lambda: len(receiver.spans) >= 8, timeout=10)  # the full batches
    finally:
        sink.shutdown()
    received = [span.name for span in receiver.spans]
    assert received == [f"process t{n}" for n in range(10)]
    assert all(span.attributes == {**LEADING, **REST} for span in receiver.spans)


def test_the_sink_sends_what_it_holds_when_spans_stop_coming_a_few_at_most_once_in_a_while(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a schedule delay of ten minutes, spans that stop coming are sent all the same: a
    few at once, a few more no sooner than ``quiet_apart`` after, and a lot (ENCODE_BATCH or
    more) at once again, however soon: with ``quiet_apart`` ten minutes too, they still arrive
    (a wait of a minute at most, which no slow machine needs).
    kills: sink-never-sends-on-a-lull, sink-not-woken-by-the-first-span,
    sink-lull-sends-unspaced, sink-spaces-large-lull-sends"""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    made, _ = provider()
    tracer = made.get_tracer("pauta.jobqueue")
    traces = SpanExporter(endpoint=f"{receiver.endpoint}/v1/traces")
    for spin in (0, -1.0, float("nan")):  # a lull of no time would keep the thread spinning
        with pytest.raises(ValueError, match="quiet must be"):
            AttemptSpanSink(made, traces, made.resource, SCOPE, quiet=spin)

    def end(sink: AttemptSpanSink, count: int) -> None:
        for _ in range(count):
            RootSpans(tracer, sink).start(
                "process t", SpanKind.CONSUMER, dict(REST), [], LEADING
            ).end()

    def received(count: int) -> None:
        wait_until(lambda: len(receiver.spans) == count, timeout=60, interval=0.005)

    apart = 3.0
    spaced = AttemptSpanSink(made, traces, made.resource, SCOPE, quiet_apart=apart)
    try:
        end(spaced, 3)
        received(3)
        first_seen = time.monotonic()
        end(spaced, 2)
        received(5)
        assert time.monotonic() - first_seen > apart - 0.1  # the first send was before first_seen
    finally:
        spaced.shutdown()
    assert len(receiver.spans) == 5
    traces = SpanExporter(endpoint=f"{receiver.endpoint}/v1/traces")
    held = AttemptSpanSink(made, traces, made.resource, SCOPE, quiet_apart=600.0)
    try:
        end(held, 3)
        received(8)
        end(held, ENCODE_BATCH + 10)  # not held back ten minutes to the next turn
        received(ENCODE_BATCH + 18)
    finally:
        held.shutdown()


EXITING = """
import sys
from opentelemetry.trace import SpanKind
from jobqueue.attempt_export import AttemptSpanSink
from jobqueue.attempt_span import RootSpans
from jobqueue.otlp_encoding import SpanExporter
from tests.jobqueue.test_attempt_span import provider
from tests.jobqueue.test_deferred_span import LEADING, REST, SCOPE

made, _ = provider()
tracer = made.get_tracer("pauta.jobqueue")
traces = SpanExporter(endpoint=sys.argv[1] + "/v1/traces")
sink = AttemptSpanSink(made, traces, made.resource, SCOPE, quiet=None)
for n in range(3):
    RootSpans(tracer, sink).start(
        f"process t{n}", SpanKind.CONSUMER, dict(REST), [], LEADING
    ).end()
"""


def test_a_process_that_exits_sends_what_its_sink_holds(receiver: Receiver) -> None:
    """A real interpreter ends without anyone shutting the sink down (as a worker does once its
    runner has stopped): the spans the sink holds are sent on the way out, though neither a
    full batch, the schedule delay nor a lull would have sent them.
    kills: sink-never-flushed-at-exit"""
    exited = subprocess.run(
        [sys.executable, "-c", EXITING, receiver.endpoint],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "600000"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exited.returncode == 0, exited.stderr
    assert [span.name for span in receiver.spans] == ["process t0", "process t1", "process t2"]


def test_a_workers_attempts_each_reach_the_collector_once_changed_or_not(
    database_url: str, workers: list[WorkerProcess], receiver: Receiver
) -> None:
    """Real worker processes: attempts nobody touched (through the sink), a task that tags its
    span and a failed attempt (through the processors, with the tag, the error status and the
    exception) each give exactly one span, whose trace is the one their attempt row names.
    kills: deferred-span-change-dropped, deferred-encoding-ids-by-the-wrong-position"""
    with psycopg.connect(database_url, autocommit=True) as conn:
        enqueue_many(
            conn,
            [JobRequest("flaky", {"failures": 0})] * 30
            + [JobRequest("flaky", {"failures": 1}), JobRequest("tags_its_span", {"tag": "t"})],
        )
        worker = start_worker(
            workers,
            database_url,
            "--single",
            "--queues",
            "default=4",
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                # nothing timed: what is not a full batch is sent at exit or never
                "OTEL_BSP_SCHEDULE_DELAY": "600000",
            },
        )
        wait_until(
            lambda: (
                conn.execute("SELECT count(*) FROM jobs WHERE state = 'succeeded'").fetchone()[0]
                == 32
            ),
            timeout=60,
        )
        worker.signal(signal.SIGTERM)  # what the sink holds is sent on the way out
        assert worker.wait() == 0
        rows = conn.execute("SELECT trace_id, outcome, job_id FROM job_attempts").fetchall()
    assert len(rows) == 33 and all(trace_id for trace_id, _, _ in rows)
    spans = wait_until(
        lambda: (
            (
                found := receiver.spans_named("process flaky")
                + receiver.spans_named("process tags_its_span")
            )
            and len(found) >= 33
            and found
        ),
        timeout=20,
    )
    assert sorted(span.trace_id for span in spans) == sorted(trace_id for trace_id, _, _ in rows)
    [tagged] = receiver.spans_named("process tags_its_span")
    assert tagged.attributes["test.tag"] == "t"
    failed = [span for span in spans if span.status_code == StatusCode.ERROR.value]
    [failed_trace] = [trace_id for trace_id, outcome, _ in rows if outcome == "failed"]
    assert [span.trace_id for span in failed] == [failed_trace]
