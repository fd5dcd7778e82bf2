"""OpenTelemetry for the engine: trace context carried from enqueue into each attempt, and the
job metrics. Off (and close to free) unless :func:`configure` found an OTLP endpoint.

- Enqueue runs in a PRODUCER span ``send {queue}`` and stores that span's W3C trace context
  (``traceparent``/``tracestate``, never baggage) with the job.
- Each attempt runs in a CONSUMER span ``process {task}`` linked to the stored context, with
  the messaging attributes, the attempt and the tenant; a failure marks it as an error with the
  exception recorded. Its trace id is written to ``job_attempts.trace_id``.
- Metrics: jobs processed (counter by queue, task, outcome), run time and wait time
  (histograms by queue, task), and — reported by the maintenance leader only — queue depth and
  oldest waiting age (observable gauges by queue).

The SDK is configured from the standard ``OTEL_*`` environment variables (endpoint, protocol,
headers, service name, sampler, resource attributes).
"""

import logging
import math
import os
import re
import threading
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from time import time_ns
from typing import TYPE_CHECKING, Any

from opentelemetry import context, metrics, trace
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.propagation import _SPAN_KEY
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from jobqueue.errors import ConfigurationError

if TYPE_CHECKING:
    from jobqueue.store import ClaimedJob

MESSAGING_SYSTEM = "pauta"
METER_NAME = "pauta.jobqueue"  # the instrumentation scope of the engine's spans and metrics
_propagator = TraceContextTextMapPropagator()  # W3C trace context only: no baggage
_configured_pid: int | None = None
# This process's id, read again in a forked child: ``os.getpid()`` is a system call, and
# active() is asked several times an attempt.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)

log = logging.getLogger("jobqueue.telemetry")


def active() -> bool:
    """Whether this process exports telemetry (checked before doing any tracing work); a child
    forked from a process that does is not active until it configures its own."""
    return _configured_pid == _pid


def endpoint_configured(environ: Mapping[str, str]) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    return any(
        environ.get(name)
        for name in (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        )
    )


def configure(service_name: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install the SDK's tracer and meter providers with OTLP exporters, once per process.

    Returns False (and installs nothing) when no OTLP endpoint is configured. Call it after a
    fork: batch exporters run threads, and threads do not survive a fork.
    """
    global _configured_pid
    if active():
        return True
    if not endpoint_configured(environ):
        return False
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    class Reader(JobTimesReader, PeriodicExportingMetricReader):
        """The OTLP metric exporter's reader, with the engine's job histograms."""

    span_exporter, metric_exporter = _exporters(environ)
    # Both read their OTEL_* variables and refuse some values: made before anything is installed
    with _refused_as_configuration(environ, BATCH_VARIABLES, BATCH_RULE):
        processor = BatchSpanProcessor(span_exporter)
    with _refused_as_configuration(environ, METRIC_VARIABLES, METRIC_RULE):
        reader = Reader(metric_exporter)
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME (which wins).
    resource = Resource.create({SERVICE_NAME: environ.get("OTEL_SERVICE_NAME", service_name)})
    tracer_provider = TracerProvider(resource=resource)  # sampler from OTEL_TRACES_SAMPLER
    tracer_provider.add_span_processor(processor)
    trace.set_tracer_provider(tracer_provider)
    _deferred_attempt_spans(tracer_provider, span_exporter, resource)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=[reader]))
    install_log_correlation()
    _configured_pid = _pid
    log.info("exporting traces and metrics over OTLP as %s", resource.attributes[SERVICE_NAME])
    return True


# What the SDK's batch processor and metric reader read, and what they accept.
BATCH_VARIABLES = (
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
)
BATCH_RULE = (
    "each to a whole number above 0, with OTEL_BSP_MAX_EXPORT_BATCH_SIZE at most "
    "OTEL_BSP_MAX_QUEUE_SIZE (unset, they are 5000, 2048 and 512)"
)
METRIC_VARIABLES = ("OTEL_METRIC_EXPORT_INTERVAL",)
METRIC_RULE = "it to a number of milliseconds above 0 (unset, it is 60000)"


@contextmanager
def _refused_as_configuration(
    environ: Mapping[str, str], names: Sequence[str], rule: str
) -> Iterator[None]:
    """The SDK's refusal of its settings (a bare ValueError, which stopped a worker with a
    traceback) as a ConfigurationError naming the variables and what they must be."""
    try:
        yield
    except ValueError as error:
        given = ", ".join(f"{name}={environ[name]!r}" for name in names if name in environ)
        reason = " ".join(str(error).split()).rstrip(".")
        raise ConfigurationError(
            f"{given or ' or '.join(names)} is refused by the OpenTelemetry SDK ({reason}): "
            f"set {rule}"
        ) from None


# The provider configure made and the sink of its deferred attempt spans (attempt_export).
_attempt_sink: tuple[trace.TracerProvider, Any] | None = None


def _deferred_attempt_spans(provider: Any, span_exporter: Any, resource: Any) -> None:
    """Attempt spans nobody changes go to an AttemptSpanSink of their own, with an exporter of
    the same class and settings as the batch processor's (OTLP/HTTP only: gRPC sends message
    objects, and its spans keep the processor's path)."""
    global _attempt_sink
    from jobqueue import otlp_encoding

    if type(span_exporter) is not otlp_encoding.SpanExporter:
        _attempt_sink = None
        return
    from jobqueue.attempt_export import AttemptSpanSink

    scope = provider.get_tracer(METER_NAME)._instrumentation_scope
    sink = AttemptSpanSink(provider, otlp_encoding.SpanExporter(), resource, scope)
    _attempt_sink = (provider, sink)


def _exporters(environ: Mapping[str, str]) -> tuple[Any, Any]:
    protocol = environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
    elif protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
            OTLPMetricExporter,
        )

        # the OTLP/HTTP exporter with a cheaper encoding of the same bytes (otlp_encoding)
        from jobqueue.otlp_encoding import SpanExporter as OTLPSpanExporter  # type: ignore[assignment]
    else:
        raise ConfigurationError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or grpc, not {protocol!r}"
        )
    return OTLPSpanExporter(), OTLPMetricExporter()


def mark_active_for_tests() -> None:
    """Treat this process as exporting, with whatever providers the caller installed."""
    global _configured_pid
    _configured_pid = _pid


# -- traces --------------------------------------------------------------------------------------


# (name, kind, attributes, links, shared attributes that come before them)
RootSpanStart = Callable[
    [str, SpanKind, dict[str, Any], Sequence[Link], dict[str, Any]], trace.Span
]
_cached_tracer: tuple[trace.TracerProvider, trace.Tracer, RootSpanStart] | None = None


def _tracer_and_root_start() -> tuple[trace.Tracer, RootSpanStart]:
    """The engine's tracer from the current provider, made once per provider (getting a tracer
    builds an instrumentation scope and cost about a sixth of a no-op attempt with tracing on),
    and how an attempt's span, the root of a new trace, is started with it: as a lighter
    :class:`~jobqueue.attempt_span.AttemptSpan` when the tracer is the SDK's."""
    global _cached_tracer
    provider = trace.get_tracer_provider()
    if _cached_tracer is None or _cached_tracer[0] is not provider:
        from opentelemetry.sdk.trace import Tracer

        from jobqueue.attempt_span import RootSpans

        tracer = provider.get_tracer(METER_NAME)
        if isinstance(tracer, Tracer):
            sink = _attempt_sink[1] if _attempt_sink and _attempt_sink[0] is provider else None
            start: RootSpanStart = RootSpans(tracer, sink).start
        else:

            def start(
                name: str,
                kind: SpanKind,
                attributes: dict[str, Any],
                links: Sequence[Link],
                leading: dict[str, Any],
            ) -> trace.Span:
                return tracer.start_span(
                    name,
                    context.Context(),
                    kind,
                    attributes={**leading, **attributes},
                    links=links,
                )

        _cached_tracer = (provider, tracer, start)
    return _cached_tracer[1], _cached_tracer[2]


def _tracer() -> trace.Tracer:
    return _tracer_and_root_start()[0]


@contextmanager
def producer(queue: str, task: str, count: int) -> Iterator[dict[str, str] | None]:
    """A PRODUCER span around an enqueue; yields the trace context to store with the jobs."""
    if not active():
        yield None
        return
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM,
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": queue,
        "pauta.task": task,
    }
    if count > 1:
        attributes["messaging.batch.message_count"] = count
    with _tracer().start_as_current_span(
        f"send {queue}", kind=SpanKind.PRODUCER, attributes=attributes
    ):
        carrier: dict[str, str] = {}
        _propagator.inject(carrier)
        yield carrier or None


_leading: dict[tuple[str, str, int], tuple[str, dict[str, Any]]] = {}


def _leading_attributes(queue: str, task: str, tenant_id: int) -> tuple[str, dict[str, Any]]:
    """An attempt span's name, and its attributes that are the same for every job of a queue,
    task and tenant, first in its attributes: one shared name and dict each (the OTLP encoder
    of deferred spans encodes the dict once, and finds the name's field by the name, whose
    hash a kept string keeps). Bounded: emptied past 4,096."""
    found = _leading.get((queue, task, tenant_id))
    if found is None:
        if len(_leading) >= 4096:
            _leading.clear()
        found = _leading[queue, task, tenant_id] = (
            f"process {task}",
            {
                "messaging.system": MESSAGING_SYSTEM,
                "messaging.operation.type": "process",
                "messaging.operation.name": "process",
                "messaging.destination.name": queue,
                "pauta.task": task,
                "pauta.tenant.id": tenant_id,
            },
        )
    return found


class ConsumerSpan:
    """A CONSUMER span ``process {task}`` around one attempt, linked to the enqueuing context.

    ``with ConsumerSpan(job, trace_context) as span`` gives the span (``None`` when telemetry is
    off), current for the block. The caller reports a failure with :func:`record_failure`; the
    span is not made current for the caller's exceptions to pass. A class, not a generator's
    context manager: it is entered at every attempt, and the generator's own machinery showed
    in a traced drain's profile (docs/benchmarks.md, "2026-12-02, late").
    """

    __slots__ = ("_job", "_span", "_token", "_trace_context")

    def __init__(self, job: "ClaimedJob", trace_context: Mapping[str, str] | None) -> None:
        self._job = job
        self._trace_context = trace_context
        self._span: Any = None
        self._token: object = None

    def __enter__(self) -> Any:
        if not active():
            return None
        job = self._job
        links = enqueuing_links(self._trace_context) if self._trace_context else ()
        name, leading = _leading_attributes(job.queue, job.task, job.tenant_id)
        attributes = {"messaging.message.id": str(job.id), "pauta.job.attempt": job.attempt}
        # A new trace per attempt (the enqueuing request's trace is linked, not a parent).
        start = _tracer_and_root_start()[1]
        span = self._span = start(name, SpanKind.CONSUMER, attributes, links, leading)
        self._token = _attach_span(span)
        return span

    def __exit__(self, *_exception: object) -> None:
        span = self._span
        if span is not None:
            _detach(self._token)
            span.end()


def _attach_span(span: trace.Span) -> object:
    """``context.attach(trace.set_span_in_context(span))``: the current context with ``span``
    as its span, made current. With the SDK's default runtime context (context variables) its
    variable is set here directly: the API's calls around it took 1.2 µs of an attempt, this
    0.7 (docs/benchmarks.md, "2026-12-05, night"). Another runtime context (chosen by
    ``OTEL_PYTHON_CONTEXT``) goes through the API."""
    if _CONTEXT_VARIABLE is None:
        return context.attach(trace.set_span_in_context(span))
    current = _CONTEXT_VARIABLE.get()
    return _CONTEXT_VARIABLE.set(
        context.Context({**current, _SPAN_KEY: span} if current else {_SPAN_KEY: span})
    )


def _detach(token: object) -> None:
    """``context.detach(token)`` for a token of :func:`_attach_span`: the context variable is
    reset here directly with the SDK's default runtime context, as it was set (0.2 µs of the
    API's calls less), with the API's handling of a token that cannot be reset: logged."""
    if _CONTEXT_VARIABLE is None:
        context.detach(token)  # type: ignore[arg-type]
        return
    try:
        _CONTEXT_VARIABLE.reset(token)  # type: ignore[arg-type]
    except Exception:  # as the API's detach: a token made in another context is logged
        log.exception("Failed to detach context")


def _context_variable() -> "ContextVar[context.Context] | None":
    """The context variable the API's runtime context keeps the current context in, when it is
    the SDK's default one (``contextvars_context``): None for any other."""
    runtime = getattr(context, "_RUNTIME_CONTEXT", None)
    if type(runtime) is not ContextVarsRuntimeContext:
        return None
    variable = getattr(runtime, "_current_context", None)
    return variable if isinstance(variable, ContextVar) else None


_CONTEXT_VARIABLE = _context_variable()


# What ``producer`` stores: a W3C traceparent of version 00, lowercase, and no tracestate.
_STORED_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


# An attempt span's links, by the traceparent its job stored: one per traceparent, shared by
# the spans that name it. Bounded: emptied past 4,096.
_links_by_traceparent: dict[str, tuple[Link, ...]] = {}


def enqueuing_links(trace_context: object) -> tuple[Link, ...]:
    """The links of an attempt's span: one to the span that enqueued the job, or none. The jobs
    of one ``enqueue_many`` store the same trace context: the link is read once for them all
    (reading it cost about 6 µs a job in a slow hour, docs/benchmarks.md), by the traceparent,
    when that is all the context holds."""
    traceparent = (
        trace_context.get("traceparent")
        if isinstance(trace_context, Mapping) and len(trace_context) == 1
        else None
    )
    if type(traceparent) is str:
        found = _links_by_traceparent.get(traceparent)
        if found is not None:
            return found
    span_context = enqueuing_span_context(trace_context)
    links = () if span_context is None else (Link(span_context),)
    if type(traceparent) is str:
        if len(_links_by_traceparent) >= 4096:
            _links_by_traceparent.clear()
        _links_by_traceparent[traceparent] = links
    return links


def enqueuing_span_context(trace_context: object) -> SpanContext | None:
    """The span context a job's stored trace context names (its enqueuing span), or None when
    it names none: what ``extract`` of the W3C propagator finds. The form ``producer`` writes
    is read here directly (the propagator took 6.5 of a linked attempt span's 47.8 µs,
    docs/benchmarks.md); any other form, e.g. one with a tracestate, goes through it. A
    stored value that is not a trace context at all (a row written by hand: a number, a list)
    names none: the attempt runs without the link rather than the runner failing on it."""
    if not isinstance(trace_context, Mapping):
        return None
    if len(trace_context) == 1:
        traceparent = trace_context.get("traceparent")
        if isinstance(traceparent, str) and (match := _STORED_TRACEPARENT.fullmatch(traceparent)):
            trace_hex, span_hex, flags = match.groups()
            trace_id, span_id = int(trace_hex, 16), int(span_hex, 16)
            if not (trace_id and span_id):
                return None
            return SpanContext(trace_id, span_id, True, TraceFlags(int(flags, 16)))
    try:
        extracted = _propagator.extract(trace_context)
    except (TypeError, AttributeError, ValueError):  # a header that is not text
        return None
    span_context = trace.get_current_span(extracted).get_span_context()
    return span_context if span_context.is_valid else None


def record_failure(span: Any, error: BaseException, outcome: str, description: str) -> None:
    """Mark the attempt's span failed; ``description`` is the cleaned, cut error message."""
    if span is None:
        return
    try:
        span.record_exception(error)
    except Exception:  # an exception whose message cannot be read: the status still says it
        log.debug("could not record the exception on the span", exc_info=True)
    span.set_status(Status(StatusCode.ERROR, description))
    span.set_attribute("pauta.job.outcome", outcome)


def trace_id_of(span: Any) -> str | None:
    """The attempt's trace id, to store with its row; None when no trace of it is exported (a
    sampler left it out): a stored id always names a trace that exists."""
    if span is None:
        return None
    span_context = span.get_span_context()
    if not (span_context.is_valid and span_context.trace_flags & TraceFlags.SAMPLED):
        return None
    trace_id: int = span_context.trace_id
    return trace_id.to_bytes(16, "big").hex()  # format_trace_id's text, without formatting


# -- metrics -------------------------------------------------------------------------------------


# The job histograms' bucket bounds, in seconds, from 5 ms to an hour. Without them the SDK's
# defaults (0, 5, 10, 25 ... 10,000), made for milliseconds, put every attempt under 5 s in one
# bucket.
DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    600.0, 1800.0, 3600.0,
)  # fmt: skip


class _Series:
    """One histogram series (an instrument's values for one queue and task), aggregated as the
    SDK's explicit-bucket histogram does: bucket ``i`` counts values in (bound ``i-1``, bound
    ``i``], the last one those above every bound.

    Values wait in ``pending`` and are folded in together, at most ``FOLD_AT`` at a time: once
    sorted (in C), each bucket's count is where its bound falls among them, and the sum, the
    least and the greatest come from C too. Recording the run and wait times of an attempt as
    they came took about 2.9 µs of a traced drain's runner an attempt, folded about 0.9
    (py-spy; docs/benchmarks.md, "2026-12-05, night")."""

    __slots__ = ("count", "counts", "max", "min", "pending", "since", "total")

    FOLD_AT = 1024

    def __init__(self, since: int) -> None:
        self.counts = [0] * (len(DURATION_BUCKETS) + 1)
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf
        self.since = since  # the start of what it counts, in ns since the epoch
        self.pending: list[float] = []  # values not yet folded in: none below zero

    def fold(self) -> None:
        """Add the pending values to the buckets, the count, the sum and the extremes."""
        if not self.pending:
            return
        values = sorted(self.pending)
        self.pending = []
        counts = self.counts
        below = 0  # values at or under the bounds so far
        for index, bound in enumerate(DURATION_BUCKETS):
            at_or_under = bisect_right(values, bound, below)
            counts[index] += at_or_under - below
            below = at_or_under
        counts[-1] += len(values) - below
        self.count += len(values)
        self.total += sum(values)
        self.min = min(self.min, values[0])
        self.max = max(self.max, values[-1])

    def point(self, attributes: dict[str, str], now: int) -> Any:
        """Its data point, of the values folded in (``collect`` folds before it asks)."""
        from opentelemetry.sdk.metrics.export import HistogramDataPoint

        return HistogramDataPoint(
            attributes=attributes,
            start_time_unix_nano=self.since,
            time_unix_nano=now,
            count=self.count,
            sum=self.total,
            bucket_counts=tuple(self.counts),
            explicit_bounds=DURATION_BUCKETS,
            min=self.min,
            max=self.max,
        )


class JobTimes:
    """The run and wait histograms, aggregated by the engine instead of the SDK.

    The SDK's ``Histogram.record`` cleans and hashes the labels and builds a measurement at
    every call: two calls an attempt were about a sixth of a traced drain's time in the worker
    (docs/benchmarks.md, "2026-12-03, evening"). Here an attempt's two values go into buckets
    kept per queue and task, under one lock, and :class:`JobTimesReader` readers add them to
    every collection as the SDK's own histogram points would be: the same names, units,
    bounds, labels and temporality. What they do not get: the SDK's views (a view cannot rename
    them or change their bounds) and exemplars.
    """

    RUN = ("pauta.job.run.duration", "How long an attempt ran")
    WAIT = ("pauta.job.wait.duration", "From becoming visible to being claimed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str], tuple[_Series, _Series]] = {}

    def record(self, times: Iterable[tuple[str, str, float, float]]) -> None:
        """Attempts' ``(queue, task, run, wait)`` times, in seconds; a negative value (a clock
        stepped back between two hosts) is left out, as the SDK's histogram leaves it out."""
        with self._lock:
            found = self._series
            for queue, task, run, wait in times:
                series = found.get((queue, task))
                if series is None:
                    now = time_ns()
                    series = found[queue, task] = (_Series(now), _Series(now))
                runs, waits = series
                if run >= 0:
                    runs.pending.append(run)
                    if len(runs.pending) >= _Series.FOLD_AT:
                        runs.fold()
                if wait >= 0:
                    waits.pending.append(wait)
                    if len(waits.pending) >= _Series.FOLD_AT:
                        waits.fold()

    def collect(self, delta: bool) -> list[Any]:
        """The two histograms as the SDK's ``Metric`` data, cumulative since each series began,
        or, with ``delta``, since the last collection (whose series are then started again)."""
        from opentelemetry.sdk.metrics.export import AggregationTemporality, Histogram, Metric

        now = time_ns()
        with self._lock:
            if not self._series:
                return []
            runs, waits = [], []
            for (queue, task), (run, wait) in self._series.items():
                attributes = {"queue": queue, "task": task}
                run.fold()
                wait.fold()
                if run.count:
                    runs.append(run.point(attributes, now))
                if wait.count:
                    waits.append(wait.point(attributes, now))
            if delta:
                self._series = {key: (_Series(now), _Series(now)) for key in self._series}
        temporality = AggregationTemporality.DELTA if delta else AggregationTemporality.CUMULATIVE
        return [
            Metric(name, description, "s", Histogram(points, temporality))
            for (name, description), points in ((self.RUN, runs), (self.WAIT, waits))
            if points
        ]


job_times = JobTimes()


def with_job_times(metrics_data: Any, times: JobTimes, delta: bool) -> Any:
    """``metrics_data`` (the SDK's ``MetricsData`` of one collection) with ``times``'s
    histograms added to the engine's instrumentation scope."""
    from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics, ScopeMetrics
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    added = times.collect(delta)
    if not added:
        return metrics_data
    resources = list(metrics_data.resource_metrics)
    first = resources[0] if resources else ResourceMetrics(Resource.create(), [], "")
    scopes = list(first.scope_metrics)
    for index, scope in enumerate(scopes):
        if scope.scope.name == METER_NAME:
            scopes[index] = ScopeMetrics(scope.scope, [*scope.metrics, *added], scope.schema_url)
            break
    else:
        scopes.append(ScopeMetrics(InstrumentationScope(METER_NAME), added, ""))
    resources[:1] = [ResourceMetrics(first.resource, scopes, first.schema_url)]
    return MetricsData(resources)


class JobTimesReader:
    """Mixed into a metric reader (before it): each collection it receives carries the
    engine's job histograms (:class:`JobTimes`), in the temporality the reader prefers for
    histograms. ``telemetry.configure`` installs one; a reader without it does not see them."""

    job_times = job_times  # the process's: what the runner records

    def _receive_metrics(
        self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        from opentelemetry.sdk.metrics import Histogram
        from opentelemetry.sdk.metrics.export import AggregationTemporality

        # what the reader was given (the OTLP exporter's preference, from
        # OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE), keyed by the API's classes
        preferred = getattr(self, "_preferred_temporality", None) or {}
        delta = preferred.get(Histogram) is AggregationTemporality.DELTA
        super()._receive_metrics(  # type: ignore[misc]
            with_job_times(metrics_data, self.job_times, delta), timeout_millis, **kwargs
        )


class JobMetrics:
    """The counter, created on first use so that it binds to the configured provider, and the
    engine's histograms."""

    def __init__(self) -> None:
        meter = metrics.get_meter(METER_NAME)
        self.processed = meter.create_counter(
            "pauta.jobs.processed", unit="{job}", description="Attempts finished, by outcome"
        )

    def record_times(self, times: Iterable[tuple[str, str, float, float]]) -> None:
        """Attempts' ``(queue, task, run, wait)`` times (:data:`job_times` takes them)."""
        job_times.record(times)

    def count(self, queue: str, task: str, outcome: str, attempts: int) -> None:
        """Attempts finished with ``outcome``: the runner counts a written batch in one call."""
        self.processed.add(attempts, {"queue": queue, "task": task, "outcome": outcome})


_job_metrics: JobMetrics | None = None


def job_metrics() -> JobMetrics | None:
    global _job_metrics
    if not active():
        return None
    if _job_metrics is None:
        _job_metrics = JobMetrics()
    return _job_metrics


DepthReading = Callable[[], Iterable[tuple[str, str, float]]]  # (queue, measure, value)


def observe_queue_depth(read: DepthReading) -> None:
    """Register the leader's gauges: queue depth by state, and the oldest waiting job's age.

    ``read`` returns (queue, measure, value) with measure ``available``, ``scheduled``,
    ``running``, ``dead`` or ``oldest_age``; it yields nothing while this process is not the
    leader, so only one process reports them.
    """
    if not active():
        return
    meter = metrics.get_meter(METER_NAME)

    def depth(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        for queue, measure, value in read():
            if measure != "oldest_age":
                yield metrics.Observation(value, {"queue": queue, "state": measure})

    def oldest(_options: metrics.CallbackOptions) -> Iterable[metrics.Observation]:
        for queue, measure, value in read():
            if measure == "oldest_age":
                yield metrics.Observation(value, {"queue": queue})

    meter.create_observable_gauge(
        "pauta.queue.depth", callbacks=[depth], unit="{job}", description="Jobs by state"
    )
    meter.create_observable_gauge(
        "pauta.queue.oldest_waiting_age",
        callbacks=[oldest],
        unit="s",
        description="Age of the oldest job waiting to run",
    )


# -- logs ----------------------------------------------------------------------------------------


class TraceContextFilter(logging.Filter):
    """Adds ``trace_id`` and ``span_id`` of the current span to every log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "trace_id", None):  # given explicitly (a job's attempt)
            return True
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = trace.format_trace_id(span_context.trace_id)
            record.span_id = trace.format_span_id(span_context.span_id)
        return True


def install_log_correlation() -> None:
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, TraceContextFilter) for f in handler.filters):
            handler.addFilter(TraceContextFilter())
