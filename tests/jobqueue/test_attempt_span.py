"""jobqueue.attempt_span: the span of an attempt is what the SDK's tracer would have made and
exported, field for field, whatever a task then does with it; the sampler, the limits and the
processors are the tracer's. Pure logic against real SDK tracers and the in-memory exporter."""

import random
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import context, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    DEFAULT_OFF,
    DEFAULT_ON,
    Decision,
    ParentBased,
    ParentBasedTraceIdRatio,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

from jobqueue import telemetry
from jobqueue.attempt_span import AttemptSpan, RootSpans, _span_context
from jobqueue.store import ClaimedJob
from tests.support.telemetry import memory_telemetry

ATTRIBUTES: dict[str, Any] = {
    "messaging.system": "pauta",
    "messaging.destination.name": "a-queue-with-a-long-name",
    "messaging.message.id": "42",
    "pauta.job.attempt": 2,
    "pauta.tenant.id": 7,
}
NOW = datetime(2026, 12, 2, tzinfo=UTC)
ENQUEUED = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))


def provider(
    sampler: Sampler | None = None, limits: SpanLimits | None = None
) -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    made = TracerProvider(
        sampler=sampler, resource=Resource.create({"service.name": "t"}), span_limits=limits
    )
    made.add_span_processor(SimpleSpanProcessor(exporter))
    return made, exporter


def sdk_span(tracer: Any, links: list[Link]) -> trace.Span:
    return tracer.start_span(
        "process send_mail",
        context=context.Context(),
        kind=SpanKind.CONSUMER,
        links=links,
        attributes=dict(ATTRIBUTES),
    )


def attempt_span(tracer: Any, links: list[Link]) -> trace.Span:
    return RootSpans(tracer).start("process send_mail", SpanKind.CONSUMER, dict(ATTRIBUTES), links)


def fields(span: ReadableSpan) -> dict[str, Any]:
    """What an exporter reads of a span, but for its ids and times."""
    return {
        "name": span.name,
        "kind": span.kind,
        "parent": span.parent,
        "attributes": dict(span.attributes or {}),
        "dropped_attributes": span.dropped_attributes,
        "events": [(e.name, dict(e.attributes or {})) for e in span.events],
        "dropped_events": span.dropped_events,
        "links": [(link.context, dict(link.attributes or {})) for link in span.links],
        "dropped_links": span.dropped_links,
        "status": (span.status.status_code, span.status.description),
        "resource": span.resource,
        "scope": span.instrumentation_scope,
        "flags": span.context.trace_flags if span.context else None,
        "remote": span.context.is_remote if span.context else None,
    }


VALUES = st.one_of(
    st.text(max_size=12),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.booleans(),
    st.lists(st.text(max_size=4), max_size=3),
    st.none(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),  # not a valid value
)
KEYS = st.sampled_from(["a", "b", "pauta.task", "messaging.system", "", "x.y"])
ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("set_attribute"), KEYS, VALUES),
        st.tuples(st.just("set_attributes"), st.dictionaries(KEYS, VALUES, max_size=3)),
        st.tuples(st.just("add_event"), st.text(max_size=5), st.dictionaries(KEYS, VALUES)),
        st.tuples(st.just("add_link"), st.integers(0, 3), st.dictionaries(KEYS, VALUES)),
        st.tuples(st.just("set_status"), st.sampled_from(list(StatusCode)), st.text(max_size=5)),
        st.tuples(st.just("status_object"), st.sampled_from(list(StatusCode))),
        st.tuples(st.just("update_name"), st.text(max_size=8)),
        st.tuples(st.just("record_exception"), st.text(max_size=8)),
        st.tuples(st.just("end")),
    ),
    max_size=12,
)


def act(span: trace.Span, actions: list[tuple[Any, ...]]) -> None:
    for action in actions:
        match action:
            case ("set_attribute", key, value):
                span.set_attribute(key, value)
            case ("set_attributes", values):
                span.set_attributes(values)
            case ("add_event", name, values):
                span.add_event(name, values, timestamp=1)
            case ("add_link", trace_id, values):
                span.add_link(SpanContext(trace_id, 5, is_remote=True), values)
            case ("set_status", code, description):
                span.set_status(code, description)
            case ("status_object", code):
                span.set_status(Status(code))
            case ("update_name", name):
                span.update_name(name)
            case ("record_exception", message):
                try:
                    raise ValueError(message)
                except ValueError as error:
                    span.record_exception(error, timestamp=1)
            case ("end",):
                span.end()


@settings(max_examples=200, deadline=None)
@given(
    actions=ACTIONS,
    linked=st.booleans(),
    max_attributes=st.integers(0, 9),
    max_length=st.sampled_from([None, 0, 3, 6]),
    max_links=st.integers(0, 2),
)
def test_an_attempt_span_exports_what_the_sdk_span_would_whatever_the_task_does(
    actions: list[tuple[Any, ...]],
    linked: bool,
    max_attributes: int,
    max_length: int | None,
    max_links: int,
) -> None:
    """The limits (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the like) apply to the attempt's own
    attributes and link as to what the task adds."""
    limits = SpanLimits(
        max_span_attributes=max_attributes,
        max_events=2,
        max_links=max_links,
        max_event_attributes=2,
        max_attribute_length=max_length,
    )
    exported = []
    for start in (sdk_span, attempt_span):
        made, exporter = provider(limits=limits)
        span = start(made.get_tracer("pauta.jobqueue"), [Link(ENQUEUED)] if linked else [])
        act(span, actions)
        span.end()
        [finished] = exporter.get_finished_spans()
        exported.append(fields(finished))
    assert exported[1] == exported[0]


def test_the_attempt_span_is_current_for_what_the_task_traces() -> None:
    made, exporter = provider()
    tracer = made.get_tracer("pauta.jobqueue")
    span = attempt_span(tracer, [])
    assert isinstance(span, AttemptSpan)
    with trace.use_span(span, end_on_exit=True):
        with tracer.start_as_current_span("send"):
            pass
    child, parent = exporter.get_finished_spans()
    assert child.parent == parent.context
    assert child.context.trace_id == parent.context.trace_id
    assert parent.context.trace_flags.sampled and parent.parent is None


def test_a_sampler_that_says_no_gets_no_recording_span_and_nothing_exported() -> None:
    for sampler in (ALWAYS_OFF, TraceIdRatioBased(0.0)):
        made, exporter = provider(sampler)
        span = attempt_span(made.get_tracer("pauta.jobqueue"), [])
        assert not span.is_recording()
        assert not span.get_span_context().trace_flags.sampled
        span.set_attribute("a", 1)
        span.end()
        assert exporter.get_finished_spans() == ()


class Tagging(Sampler):
    """Samples every other trace id, records the rest without sampling, and adds an attribute."""

    def should_sample(
        self,
        parent_context: context.Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        decision = Decision.RECORD_AND_SAMPLE if trace_id % 2 else Decision.RECORD_ONLY
        return SamplingResult(decision, {**(attributes or {}), "sampled.by": "tagging"})

    def get_description(self) -> str:
        return "Tagging"


def test_the_sampler_decides_recording_and_export_and_may_add_attributes() -> None:
    made, exporter = provider(Tagging())
    tracer = made.get_tracer("pauta.jobqueue")
    spans = [attempt_span(tracer, []) for _ in range(40)]
    for span in spans:
        assert span.is_recording()
        span.end()
    sampled = [s for s in spans if s.get_span_context().trace_flags.sampled]
    assert 0 < len(sampled) < len(spans)
    exported = exporter.get_finished_spans()
    assert {s.context.span_id for s in exported} == {s.get_span_context().span_id for s in sampled}
    assert all(s.attributes["sampled.by"] == "tagging" for s in exported)
    assert all(s.attributes["messaging.message.id"] == "42" for s in exported)


class GivenIds(IdGenerator):
    """Hands out the trace ids it is given, in turn (span ids count up)."""

    def __init__(self, trace_ids: list[int]) -> None:
        self.trace_ids = iter(trace_ids)
        self.span_ids = iter(range(1, 2**16))

    def generate_trace_id(self) -> int:
        return next(self.trace_ids)

    def generate_span_id(self) -> int:
        return next(self.span_ids)


class RatioLike(TraceIdRatioBased):
    """A sampler of its own kind that keeps the ratio's bound but decides otherwise: asked, not
    read as a ratio."""

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        return SamplingResult(Decision.RECORD_ONLY, kwargs.get("attributes"))


RATES = st.one_of(st.sampled_from([0.0, 0.1, 0.5, 1.0]), st.floats(0, 1))
SAMPLERS = st.one_of(
    st.sampled_from([ALWAYS_ON, ALWAYS_OFF, DEFAULT_ON, DEFAULT_OFF]),
    RATES.flatmap(
        lambda rate: st.sampled_from(
            [
                TraceIdRatioBased(rate),
                ParentBasedTraceIdRatio(rate),
                ParentBased(TraceIdRatioBased(rate), remote_parent_sampled=ALWAYS_OFF),
                ParentBased(RatioLike(rate)),
            ]
        )
    ),
    st.just(ParentBased(Tagging())),
)


def trace_ids(bound: int) -> st.SearchStrategy[list[int]]:
    """Trace ids around a ratio's cut: the low 64 bits decide, the high ones must not."""
    low = st.one_of(
        st.sampled_from([bound - 1, bound, bound + 1, 0, 1, 2**64 - 1]).filter(
            lambda bits: 0 <= bits < 2**64
        ),
        st.integers(0, 2**64 - 1),
    )
    high = st.integers(0, 2**64 - 1)
    return st.lists(
        st.builds(lambda high, low: high << 64 | low, high, low).filter(bool),
        min_size=1,
        max_size=8,
    )


@settings(max_examples=300, deadline=None)
@given(sampler=SAMPLERS, data=st.data())
def test_root_spans_are_sampled_as_the_tracers_sampler_samples_them(
    sampler: Sampler, data: st.DataObject
) -> None:
    """RootSpans decides a ratio's and an always-on sampler's root spans itself: whatever the
    sampler and the trace id, the span records, is sampled and carries what the SDK's tracer
    gives a root span with the same trace id.
    kills: root-spans-ratio-bound-inclusive, root-spans-ratio-reads-high-bits,
    root-spans-ratio-takes-its-subclasses, root-spans-static-sampler-assumed-on"""
    root = getattr(sampler, "_root", sampler)
    given_ids = data.draw(trace_ids(getattr(root, "bound", 2**63)))
    made = []
    for _ in range(2):
        tracer_provider = TracerProvider(sampler=sampler, id_generator=GivenIds(given_ids))
        tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        made.append(tracer_provider.get_tracer("pauta.jobqueue"))
    ours, sdks = RootSpans(made[0]), made[1]
    for trace_id in given_ids:
        span = ours.start("process send_mail", SpanKind.CONSUMER, dict(ATTRIBUTES), ())
        expected = sdks.start_span(
            "process send_mail",
            context=context.Context(),
            kind=SpanKind.CONSUMER,
            attributes=dict(ATTRIBUTES),
        )
        got, want = span.get_span_context(), expected.get_span_context()
        assert (got.trace_id, got.trace_flags, got.trace_state, got.is_remote) == (
            want.trace_id,
            want.trace_flags,
            want.trace_state,
            want.is_remote,
        ), trace_id
        assert span.is_recording() == expected.is_recording(), trace_id
        if span.is_recording():
            assert dict(span.attributes) == dict(expected.attributes)  # type: ignore[attr-defined]


ID_EDGES = [0, 1, 2**64 - 1, 2**64, 2**128 - 1, 2**128, -1]


@settings(max_examples=300, deadline=None)
@given(
    trace_id=st.one_of(st.sampled_from(ID_EDGES), st.integers(-1, 2**129)),
    span_id=st.one_of(st.sampled_from(ID_EDGES), st.integers(-1, 2**65)),
    sampled=st.booleans(),
    trace_state=st.sampled_from([None, TraceState(), TraceState([("vendor", "on")])]),
)
def test_a_root_spans_context_is_the_one_the_api_makes_for_any_ids(
    trace_id: int, span_id: int, sampled: bool, trace_state: TraceState | None
) -> None:
    """The span context RootSpans makes without SpanContext's constructor is the tuple the
    constructor makes, its validity included, for ids in range and out of it (an id generator
    of the user's may hand out 0 or more than 128 bits), with or without a trace state.
    kills: span-context-always-valid, span-context-valid-span-id-unchecked,
    span-context-keeps-no-trace-state"""
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
    made = _span_context(trace_id, span_id, flags, trace_state)
    expected = SpanContext(trace_id, span_id, False, flags, trace_state)
    assert type(made) is SpanContext
    assert tuple(made) == tuple(expected)
    assert made.is_valid == expected.is_valid
    assert made.trace_state is expected.trace_state or made.trace_state == expected.trace_state


def test_an_id_generator_handing_out_an_invalid_id_gets_an_invalid_span_context() -> None:
    """A trace id of 0 from the tracer's id generator gives the span an invalid context, as
    the SDK's tracer would: its trace is not stored with the attempt's row.
    kills: span-context-always-valid"""
    tracer_provider = TracerProvider(id_generator=GivenIds([0, 5]))
    tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    ours = RootSpans(tracer_provider.get_tracer("pauta.jobqueue"))
    invalid = ours.start("process send_mail", SpanKind.CONSUMER, dict(ATTRIBUTES), ())
    valid = ours.start("process send_mail", SpanKind.CONSUMER, dict(ATTRIBUTES), ())
    assert not invalid.get_span_context().is_valid
    assert telemetry.trace_id_of(invalid) is None
    assert valid.get_span_context().is_valid
    assert telemetry.trace_id_of(valid) == f"{5:032x}"


@pytest.mark.parametrize("seed", [0, 1, 2026])
def test_with_the_sdks_id_generator_a_root_span_draws_the_ids_the_sdk_would(seed: int) -> None:
    """RootSpans draws the default generator's ids itself: from the same random numbers, the
    same trace and span ids as the SDK's tracer, span after span.
    kills: root-spans-ids-drawn-in-another-order"""
    made = []
    for _ in range(2):
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        made.append(tracer_provider.get_tracer("pauta.jobqueue"))
    ours, sdks = RootSpans(made[0]), made[1]
    random.seed(seed)
    got = [ours.start("process a", SpanKind.CONSUMER, {}, ()) for _ in range(3)]
    random.seed(seed)
    want = [sdks.start_span("process a", context=context.Context()) for _ in range(3)]
    assert [(s.get_span_context().trace_id, s.get_span_context().span_id) for s in got] == [
        (s.get_span_context().trace_id, s.get_span_context().span_id) for s in want
    ]


def test_a_draw_of_zero_is_drawn_again_as_the_sdks_generator_does() -> None:
    """A draw of 0 (one in 2**128 for a trace id, 2**64 for a span id) is not an id: the
    generator is asked again, and the span gets valid ids.
    kills: root-spans-zero-draw-kept"""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    ours = RootSpans(tracer_provider.get_tracer("pauta.jobqueue"))
    ours._random_bits = lambda bits: 0  # every draw of RootSpans' own comes out 0
    span_context = ours.start("process a", SpanKind.CONSUMER, {}, ()).get_span_context()
    assert span_context.is_valid and span_context.trace_id and span_context.span_id


def test_a_tracer_a_configurator_turns_off_and_on_again_starts_spans_accordingly() -> None:
    """A tracer the provider's (experimental) configurator turns off gives no recording span
    and exports nothing, as the SDK's tracer does; turned on again, the next span records.
    kills: root-spans-tracer-always-enabled"""
    from opentelemetry.sdk.trace import _default_tracer_configurator, _disable_tracer_configurator

    made, exporter = provider()
    ours = RootSpans(made.get_tracer("pauta.jobqueue"))
    made._set_tracer_configurator(tracer_configurator=_disable_tracer_configurator)
    off = ours.start("process a", SpanKind.CONSUMER, {}, ())
    off.end()
    made._set_tracer_configurator(tracer_configurator=_default_tracer_configurator)
    on = ours.start("process b", SpanKind.CONSUMER, {}, ())
    on.end()
    assert (off.is_recording(), off.get_span_context().is_valid) == (False, False)
    assert [span.name for span in exporter.get_finished_spans()] == ["process b"]


def test_an_ended_span_refuses_changes_and_is_handed_over_once() -> None:
    made, exporter = provider()
    span = attempt_span(made.get_tracer("pauta.jobqueue"), [])
    span.end()
    span.set_attribute("late", 1)
    span.add_event("late")
    span.set_status(StatusCode.ERROR, "late")
    span.update_name("late")
    span.end()
    [finished] = exporter.get_finished_spans()
    assert "late" not in finished.attributes
    assert finished.events == ()
    assert finished.status.status_code is StatusCode.UNSET
    assert finished.name == "process send_mail"
    assert finished.end_time is not None and finished.end_time >= finished.start_time


class VendorTracerProvider(trace.TracerProvider):
    """A provider that is not the SDK's (as a vendor's SDK is), whose tracer hands its spans to
    an SDK tracer underneath so that what it was asked for can be read back."""

    def __init__(self) -> None:
        self.sdk, self.exporter = provider()

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        sdk_tracer = self.sdk.get_tracer(*args, **kwargs)

        class VendorTracer(trace.Tracer):
            def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
                return sdk_tracer.start_span(*args, **kwargs)

            def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:
                return sdk_tracer.start_as_current_span(*args, **kwargs)

        return VendorTracer()


def test_another_providers_attempt_span_carries_the_shared_attributes_and_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kills: vendor-span-without-the-leading-attributes"""
    memory_telemetry()
    vendor = VendorTracerProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: vendor)
    job = ClaimedJob(9, 1, "mail", "send_mail", {}, 0, 2, 3, NOW, NOW)
    with telemetry.ConsumerSpan(job, None):
        pass
    [finished] = vendor.exporter.get_finished_spans()
    assert dict(finished.attributes or {}) == {
        "messaging.system": "pauta",
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": "mail",
        "pauta.task": "send_mail",
        "pauta.tenant.id": 1,
        "messaging.message.id": "9",
        "pauta.job.attempt": 2,
    }


def test_a_tracer_provider_other_than_the_sdks_makes_the_attempts_spans_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The lighter span is built from the SDK tracer's parts; any other provider (here the API's
    no-op one, as a vendor's SDK would be) starts the attempt's span its own way."""
    memory_telemetry()
    job = ClaimedJob(9, 1, "mail", "send_mail", {}, 0, 1, 3, NOW, NOW)
    with telemetry.ConsumerSpan(job, None) as span:
        assert isinstance(span, AttemptSpan)
    monkeypatch.setattr(trace, "get_tracer_provider", trace.NoOpTracerProvider)
    with telemetry.ConsumerSpan(job, None) as span:
        assert not isinstance(span, AttemptSpan)
        assert not span.is_recording()
        assert trace.get_current_span() is span
    assert telemetry.trace_id_of(span) is None
