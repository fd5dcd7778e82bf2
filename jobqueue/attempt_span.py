"""A lighter span for job attempts, made without the SDK's general-purpose span.

The SDK's span cleans each attribute under a lock as it is set, builds bounded containers for
events and links, and copies itself into a new read-only span at ``end``: about 25 µs an
attempt on this machine, a quarter of a no-op job's whole cost in the runner, and most of what
tracing took from the drain. An attempt's own attributes are few, known and clean, so this span
keeps them in a plain dict and is its own read-only view once ended; what a task adds to it
(attributes, events, links) goes through the SDK's bounded containers and limits as it would on
an SDK span. Sampling, ids, the resource, the instrumentation scope and the span processors are
the SDK tracer's own, so ``OTEL_TRACES_SAMPLER`` and the exporters behave as for every other
span. What it leaves out: the SDK's experimental self-metrics of spans (``otel.sdk.span.*``).

Where ``telemetry.configure`` set the tracing up (its own batch processor and OTLP/HTTP
exporter, nothing else), an attempt's span starts lighter still, as a :class:`DeferredSpan`:
its ids, name, attributes, links and times, and nothing of the SDK's span machinery. If nothing
asks to change it (the task sets no attribute, adds no event, the attempt does not fail), it
goes at its end straight to the engine's exporter of such spans
(:class:`~jobqueue.attempt_export.AttemptSpanSink`), which writes the same OTLP bytes the
batch processor's exporter would have. The first change asked of it makes it an
:class:`AttemptSpan`, started then through the tracer's processors with its original start
time, and everything from there is that span's: it ends through the processors as above.
"""

import logging
import random
import sys
import threading
import traceback
from collections.abc import Mapping, Sequence
from time import time_ns
from typing import Any, Protocol

from opentelemetry import context as context_api
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk import util
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, Tracer
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.sdk.trace.sampling import (
    Decision,
    ParentBased,
    Sampler,
    StaticSampler,
    TraceIdRatioBased,
)
from opentelemetry.trace import (
    Link,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)
from opentelemetry.trace.span import DEFAULT_TRACE_STATE
from opentelemetry.util import types

log = logging.getLogger(__name__)

# (sampled, random trace id) -> the span context's flags
_FLAGS = {
    (sampled, random): TraceFlags(
        (TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        | (TraceFlags.RANDOM_TRACE_ID if random else 0)
    )
    for sampled in (False, True)
    for random in (False, True)
}
_RECORD_AND_SAMPLE = Decision.RECORD_AND_SAMPLE
_RECORD_ONLY = Decision.RECORD_ONLY
_UNSET = Status(StatusCode.UNSET)  # immutable: shared, as ReadableSpan's default is


_ROOT = context_api.Context()


class SpanSink(Protocol):
    """Where a :class:`DeferredSpan` nobody changed goes at its end."""

    def add(self, span: "DeferredSpan") -> None: ...

    def serves(self, tracer: Tracer) -> bool:
        """Whether the tracer's processors are still the one this sink stands in for."""


class RootSpans:
    """Starts spans with one tracer, each the root of a new trace: what
    ``tracer.start_span(name, context=Context(), ...)`` returns, with an :class:`AttemptSpan` in
    place of the SDK's span, or with a ``sink``, a :class:`DeferredSpan` that ends in it while
    unchanged.

    What the tracer alone decides (its id generator, how its sampler decides a root span, its
    span limits) is read once, here, not at every attempt: a start took 1.19 µs instead of
    1.54 (docs/benchmarks.md, "2026-12-05, morning"). Whether the tracer is enabled and
    whether the sink still serves it can change while it runs: they are asked at every start."""

    __slots__ = (
        "_bound",
        "_flags",
        "_random_bits",
        "_room",
        "_sampler",
        "_span_id",
        "_trace_id",
        "sink",
        "tracer",
    )

    def __init__(self, tracer: Tracer, sink: SpanSink | None = None) -> None:
        self.tracer = tracer
        self.sink = sink
        ids = tracer.id_generator
        self._trace_id = ids.generate_trace_id
        self._span_id = ids.generate_span_id
        # the SDK's default generator's draws, made in start without its two Python calls
        self._random_bits = random.getrandbits if type(ids) is RandomIdGenerator else None
        random_ids = ids.is_trace_id_random()
        self._flags = (_FLAGS[False, random_ids], _FLAGS[True, random_ids])  # by sampled
        self._sampler, self._bound = _root_sampling(tracer.sampler)
        # The most attributes and links the limits leave whole (a deferred span keeps them as
        # they are; where a limit would cut them, the attempt takes an AttemptSpan, which
        # applies it and counts what it dropped). A length limit may cut any text: none.
        self._room = _room(tracer._span_limits)

    def start(
        self,
        name: str,
        kind: SpanKind,
        attributes: dict[str, types.AnyValue],
        links: Sequence[Link],
        leading: Mapping[str, types.AnyValue] | None = None,
    ) -> trace.Span:
        """A new root span. ``attributes`` must hold valid attribute values (text, numbers,
        booleans): they are kept without the SDK's cleaning. ``leading``, when given, is a dict
        shared by many spans, of attributes that come before ``attributes`` (whose keys are not
        among them): the encoder of deferred spans encodes them once, and the two are merged
        into one dict only where something reads them so (a sampler, an SDK-like span)."""
        tracer = self.tracer
        if not tracer._tracer_config.is_enabled:  # _is_enabled(), turned off by a configurator
            return trace.NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
        random_bits = self._random_bits
        # RandomIdGenerator draws again while it draws 0, which the SDK's call here then does
        trace_id = (random_bits(128) if random_bits else 0) or self._trace_id()
        sampler = self._sampler
        if sampler is None:  # decided here, as the tracer's sampler decides a root span
            bound = self._bound
            recording = sampled = bound is None or trace_id & _LOW_64_BITS < bound
            trace_state = None
        else:
            every = _merged(leading, attributes)
            sampling = sampler.should_sample(_ROOT, trace_id, name, kind, every, links)
            decision = sampling.decision
            sampled = decision is _RECORD_AND_SAMPLE  # Decision.is_sampled(), without lookups
            recording = sampled or decision is _RECORD_ONLY
            trace_state = sampling.trace_state
            if recording and len(sampling.attributes) != len(every):  # it added some
                attributes = {**every, **sampling.attributes}
                leading = None  # it may have given one of the leading ones another value
        span_id = (random_bits(64) if random_bits else 0) or self._span_id()
        span_context = _span_context(trace_id, span_id, self._flags[sampled], trace_state)
        if not recording:
            return trace.NonRecordingSpan(span_context)
        sink = self.sink
        most_attributes, most_links = self._room
        if (
            sink is not None
            and sink.serves(tracer)
            and len(attributes) + (len(leading) if leading else 0) <= most_attributes
            and len(links) <= most_links
        ):
            return DeferredSpan(tracer, sink, name, span_context, kind, attributes, links, leading)
        span = AttemptSpan(tracer, name, span_context, kind, _merged(leading, attributes), links)
        # the processors are typed for the SDK's span; they read what ReadableSpan offers
        tracer.span_processor.on_start(span, parent_context=_ROOT)  # type: ignore[arg-type]
        return span


_MAX_TRACE_ID = 2**128 - 1
_MAX_SPAN_ID = 2**64 - 1


def _span_context(
    trace_id: int, span_id: int, flags: TraceFlags, trace_state: TraceState | None
) -> SpanContext:
    """``SpanContext(trace_id, span_id, False, flags, trace_state)``, made without its
    ``__new__``'s call: the same tuple, in 0.40 µs instead of 0.78 on a slow machine
    (docs/benchmarks.md, "2026-12-05, late night")."""
    return tuple.__new__(
        SpanContext,
        (
            trace_id,
            span_id,
            False,
            flags,
            DEFAULT_TRACE_STATE if trace_state is None else trace_state,
            0 < trace_id <= _MAX_TRACE_ID and 0 < span_id <= _MAX_SPAN_ID,
        ),
    )


def _merged(
    leading: Mapping[str, types.AnyValue] | None, attributes: dict[str, types.AnyValue]
) -> dict[str, types.AnyValue]:
    """A span's attributes in one dict: ``leading``'s, then ``attributes``."""
    return {**leading, **attributes} if leading else attributes


_LOW_64_BITS = TraceIdRatioBased.TRACE_ID_LIMIT  # the trace id's bits the ratio reads


def _root_sampling(sampler: Sampler) -> tuple[Sampler | None, int | None]:
    """How the root spans ``sampler`` samples are told apart: ``(sampler, None)`` when it must
    be asked for each; ``(None, None)`` when it samples every one; ``(None, bound)`` when it
    samples those whose trace id's low 64 bits are under ``bound``, as ``TraceIdRatioBased``
    decides. A root span has no parent, so ``ParentBased`` (the ``parentbased_*`` samplers,
    the SDK's default among them) decides it with its root sampler. Asking the sampler cost a
    root span of a 10%-sampled drain two look-ups of the current span and a result's making
    (docs/benchmarks.md, "2026-12-05, morning")."""
    root = sampler
    if type(sampler).should_sample is ParentBased.should_sample:
        root = getattr(sampler, "_root", sampler)  # the SDK's own name; without it, asked
    if (
        type(root) is StaticSampler
        and root.should_sample(_ROOT, 1, "").decision is _RECORD_AND_SAMPLE
    ):
        return None, None
    if type(root) is TraceIdRatioBased:
        return None, root.bound
    return sampler, None


def _room(limits: SpanLimits) -> tuple[int, int]:
    """How many attributes (``leading``'s and a span's own together) and links ``limits``
    leave whole: (-1, -1) when a length limit may cut any of them."""
    if limits.max_span_attribute_length is not None:
        return -1, -1
    return (
        sys.maxsize if limits.max_span_attributes is None else limits.max_span_attributes,
        sys.maxsize if limits.max_links is None else limits.max_links,
    )


def _kept_link(
    context: SpanContext, attributes: types.Attributes, limits: SpanLimits
) -> Link | None:
    """A link as an SDK span keeps it (its attributes bounded), or None for one it drops."""
    if not (context and (context.is_valid or attributes or context.trace_state)):
        return None
    bounded = BoundedAttributes(
        limits.max_link_attributes,
        attributes,
        max_value_len=limits.max_attribute_length,
        immutable=True,
    )
    return Link(context, bounded)


def bounded_links(links: Sequence[Link], limits: SpanLimits) -> Sequence[Link]:
    """The links an SDK span keeps of those it starts with: valid ones, at most max_links."""
    if not links:
        return ()
    valid = [
        kept
        for link in links
        if link and (kept := _kept_link(link.context, link.attributes, limits))
    ]
    if limits.max_links is not None and len(valid) > limits.max_links:
        return util.BoundedList.from_seq(limits.max_links, valid)
    return tuple(valid)


class AttemptSpan(trace.Span, ReadableSpan):
    """A recording span that is also the read-only span handed to the processors at its end
    (it refuses changes from then on, as the SDK's span does)."""

    def __init__(
        self,
        tracer: Tracer,
        name: str,
        span_context: SpanContext,
        kind: SpanKind,
        attributes: dict[str, types.AnyValue],
        links: Sequence[Link],
        start_time: int | None = None,
    ) -> None:
        # ReadableSpan's fields, set here rather than through its __init__ (which would look
        # for a resource when given none)
        self._name = name
        self._context = span_context
        self._span_context = span_context  # the same, typed as never None
        self._kind = kind
        self._instrumentation_info = tracer.instrumentation_info
        self._instrumentation_scope = tracer._instrumentation_scope
        self._parent = None
        self._resource = tracer.resource
        limits: SpanLimits = tracer._span_limits
        self._limits = limits
        self._attributes: Any = attributes  # a dict until a task adds to it, then bounded
        if limits.max_span_attribute_length is not None or (
            limits.max_span_attributes is not None and len(attributes) > limits.max_span_attributes
        ):  # limits that cut what the attempt set: they apply from the start
            self._bounded_attributes()
        self._events: Any = ()
        self._links: Any = bounded_links(links, limits)
        self._status = _UNSET
        self._end_time: int | None = None
        self._processor = tracer.span_processor
        self._lock = threading.Lock()
        self._start_time = time_ns() if start_time is None else start_time

    # -- what a task may do with the current span ---------------------------------------------

    def _open(self, what: str) -> bool:
        if self._end_time is not None:
            log.warning("Tried calling %s on an ended span.", what)
            return False
        return True

    def _bounded_attributes(self) -> BoundedAttributes:
        if not isinstance(self._attributes, BoundedAttributes):
            self._attributes = BoundedAttributes(
                self._limits.max_span_attributes,
                self._attributes,
                immutable=False,
                max_value_len=self._limits.max_span_attribute_length,
            )
        return self._attributes

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        with self._lock:
            if self._open("set_attribute"):
                self._bounded_attributes()[key] = value

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        with self._lock:
            if self._open("set_attributes"):
                bounded = self._bounded_attributes()
                for key, value in attributes.items():
                    bounded[key] = value

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        event = Event(
            name=name,
            attributes=BoundedAttributes(
                self._limits.max_event_attributes,
                attributes,
                max_value_len=self._limits.max_attribute_length,
                immutable=True,
            ),
            timestamp=timestamp,
        )
        with self._lock:
            if self._open("add_event"):
                if not isinstance(self._events, util.BoundedList):
                    self._events = util.BoundedList(self._limits.max_events)
                self._events.append(event)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        link = _kept_link(context, attributes, self._limits)
        if link is None:
            return
        with self._lock:
            if self._open("add_link"):
                if not isinstance(self._links, util.BoundedList):
                    self._links = util.BoundedList.from_seq(self._limits.max_links, self._links)
                self._links.append(link)

    def update_name(self, name: str) -> None:
        with self._lock:
            if self._open("update_name"):
                self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        with self._lock:
            if not self._open("set_status") or self._status.status_code is StatusCode.OK:
                return
            if isinstance(status, Status):
                if status.status_code is StatusCode.UNSET:
                    return
                if description is not None:
                    log.warning(
                        "Description %s ignored. Use either `Status` or "
                        "`(StatusCode, Description)`",
                        description,
                    )
                self._status = status
            elif status is not StatusCode.UNSET:
                self._status = Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        """An ``exception`` event with the semantic conventions' attributes, as the SDK's."""
        module = type(exception).__module__
        qualname = type(exception).__qualname__
        recorded: dict[str, types.AnyValue] = {
            "exception.type": qualname if module in ("", "builtins") else f"{module}.{qualname}",
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event("exception", recorded, timestamp)

    def is_recording(self) -> bool:
        return self._end_time is None

    def get_span_context(self) -> SpanContext:
        return self._span_context

    def end(self, end_time: int | None = None) -> None:
        with self._lock:
            if self._end_time is not None:
                log.warning("Calling end() on an ended span.")
                return
            self._end_time = end_time if end_time is not None else time_ns()
            if isinstance(self._attributes, BoundedAttributes):
                self._attributes._immutable = True
        self._processor._on_ending(self)  # type: ignore[arg-type]
        self._processor.on_end(self)


class DeferredSpan(trace.Span):
    """An attempt's span kept as its plain values until something asks to change it.

    Unchanged, it ends in its sink: no processor sees it start or end (only
    ``telemetry.configure``'s set-up, whose one processor would hand it to the exporter, makes
    these). The first change asked of it (an attribute, an event, a link, a status, a new name,
    an exception) makes the :class:`AttemptSpan` it stands for, with the same ids, attributes,
    links and start time, started through the tracer's processors; that span takes the change
    and every later call, its end included."""

    def __init__(
        self,
        tracer: Tracer,
        sink: SpanSink,
        name: str,
        span_context: SpanContext,
        kind: SpanKind,
        attributes: dict[str, types.AnyValue],
        links: Sequence[Link],
        leading: Mapping[str, types.AnyValue] | None = None,
    ) -> None:
        self.tracer = tracer
        self.leading = leading
        self.own = attributes  # its attributes after the leading ones
        self.sink = sink
        self.name = name
        self.span_context = span_context
        self.kind = kind
        self.links = links
        self.end_time: int | None = None
        self._full: AttemptSpan | None = None
        # Held while it turns into an AttemptSpan or ends: the two must not cross (a task may
        # touch its span from a thread of its own). Its own: one lock shared by every span
        # made a convoy of the runner's threads at each attempt's end (docs/benchmarks.md).
        self._turning = threading.Lock()
        self.start_time = time_ns()

    @property
    def attributes(self) -> dict[str, types.AnyValue]:
        """Its attributes: the leading ones, then its own."""
        return _merged(self.leading, self.own)

    def full(self, what: str) -> AttemptSpan | None:
        """The AttemptSpan this span stands for, made at the first call that changes it; None
        (with the SDK's warning) once it ended unchanged."""
        with self._turning:
            if self._full is None:
                if self.end_time is not None:
                    log.warning("Tried calling %s on an ended span.", what)
                    return None
                tracer = self.tracer
                full = AttemptSpan(
                    tracer,
                    self.name,
                    self.span_context,
                    self.kind,
                    self.attributes,
                    self.links,
                    self.start_time,
                )
                tracer.span_processor.on_start(full, parent_context=_ROOT)  # type: ignore[arg-type]
                self._full = full
            return self._full

    def set_attribute(self, key: str, value: types.AnyValue) -> None:
        if full := self.full("set_attribute"):
            full.set_attribute(key, value)

    def set_attributes(self, attributes: Mapping[str, types.AnyValue]) -> None:
        if full := self.full("set_attributes"):
            full.set_attributes(attributes)

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        if full := self.full("add_event"):
            full.add_event(name, attributes, timestamp)

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if full := self.full("add_link"):
            full.add_link(context, attributes)

    def update_name(self, name: str) -> None:
        if full := self.full("update_name"):
            full.update_name(name)

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if full := self.full("set_status"):
            full.set_status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        if full := self.full("record_exception"):
            full.record_exception(exception, attributes, timestamp, escaped)

    def is_recording(self) -> bool:
        full = self._full
        return self.end_time is None if full is None else full.is_recording()

    def get_span_context(self) -> SpanContext:
        return self.span_context

    def end(self, end_time: int | None = None) -> None:
        with self._turning:
            full = self._full
            if full is None:
                if self.end_time is not None:
                    log.warning("Calling end() on an ended span.")
                    return
                self.end_time = end_time if end_time is not None else time_ns()
        if full is not None:
            full.end(end_time)
        else:
            self.sink.add(self)
