"""The engine's exporter of the attempt spans nobody changed (``attempt_span.DeferredSpan``).

The SDK's batch processor takes a finished span, and its exporter reads the span's fields
through ``ReadableSpan``'s properties and encodes it: in a drain of no-op jobs, with the run and
wait histograms no longer recorded through the SDK, that export was what kept a traced drain at
half the untraced one's rate (docs/benchmarks.md, "2026-12-03, evening"). This sink takes
each deferred span as it ends, encodes it with :func:`~jobqueue.otlp_encoding.encode_unchanged`
(the bytes the processor's exporter would have sent for it) in its own thread, and sends them
in batches through the same OTLP/HTTP exporter class (its endpoint, headers, timeout,
retries, size limit and self-metrics, from the same ``OTEL_*`` variables).

The encoding runs in the sink's thread, ``ENCODE_BATCH`` ended spans at a time, not in the
runner's thread that ended the span: in a drain of no-op jobs the runner's threads take turns
with its fetcher, completer and database calls between two attempts, and an encoding done
there cost more than in a loop of them. Encoded in the sink's thread, tracing took 75 µs of
the runner's CPU a job instead of 100 (medians of 12 rounds, ``bench.tracing_cpu``, on the
slow machine of 2026-12-04's afternoon: docs/benchmarks.md). About ``ENCODE_BATCH`` spans
wait as objects, for a few milliseconds: too few, too briefly, for the garbage collector's
walks of them to count (the sink once kept thousands of span objects: about 4 µs a span).

It batches as the SDK's batch processor does and reads the processor's own variables: a batch
of ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` spans is sent as soon as it is there, what is left every
``OTEL_BSP_SCHEDULE_DELAY`` (5,000 ms), and past ``OTEL_BSP_MAX_QUEUE_SIZE`` waiting spans new
ones are dropped and counted. Where they are not set, its batches are larger than the
processor's: 4,096 spans (not 512) and 16,384 waiting (not 2,048). A request costs the
exporter's HTTP client about 1 ms of the worker's Python, measured: 2 µs a span at 512, a fifth
of what the rest of an attempt's span costs. At exit (``atexit``) it sends what it holds.

Unlike the processor, it also sends what it holds once the spans stop coming (``QUIET_SECONDS``
without a new one): a burst's spans reach the collector as the burst ends instead of waiting
for the delay. At the end of a 20,000-job drain that wait was 47-195 ms (with a 200 ms delay)
and became 5-41 ms (docs/benchmarks.md, "2026-12-04, evening").
"""

import atexit
import logging
import os
import threading
import time
from collections import deque
from functools import partial

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Tracer, TracerProvider
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from jobqueue.attempt_span import DeferredSpan
from jobqueue.otlp_encoding import SpanExporter, encode_scope_spans, encode_unchanged

log = logging.getLogger(__name__)

ENCODE_BATCH = 256  # ended spans the sink's thread is woken to encode (fewer when batches are)
# Spans that stop coming are sent once none has ended for QUIET_SECONDS, not at the schedule
# delay: the spans of a burst reach the collector when the burst ends. Fewer than
# ENCODE_BATCH spans are sent so at most once every QUIET_SENDS_APART seconds, so that a worker
# running a job every few tens of milliseconds does not post each span alone; the schedule
# delay bounds their wait.
QUIET_SECONDS = 0.02
QUIET_SENDS_APART = 1.0


def _setting(name: str, default: int) -> int:
    """A positive whole number from the environment, or the default (with a warning) when the
    variable holds anything else, as the SDK's batch processor reads its own."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        log.warning("%s must be a whole number above 0, not %r: using %d", name, text, default)
        return default
    return value


class AttemptSpanSink:
    """Batches deferred spans and sends them from a thread of its own, for ``provider``'s tracers
    while its one span processor is the batch processor ``telemetry.configure`` gave it: a
    processor added later (to see every span) turns the deferred spans off."""

    def __init__(
        self,
        provider: TracerProvider,
        exporter: SpanExporter,
        resource: Resource,
        scope: InstrumentationScope,
        *,
        quiet: float | None = QUIET_SECONDS,
        quiet_apart: float = QUIET_SENDS_APART,
    ) -> None:
        """``quiet``: seconds without a new span after which what waits is sent (None: only
        full batches and the schedule delay send); ``quiet_apart``: the least time between two
        such sends of fewer than ``ENCODE_BATCH`` spans."""
        if quiet is not None and not quiet > 0:
            raise ValueError(f"quiet must be None or a number of seconds above 0, not {quiet!r}")
        # the provider's processors as configure left them: adding one makes a new tuple
        self._processors = provider._active_span_processor._span_processors
        self.exporter = exporter
        self.resource = resource
        self.scope = scope
        self.batch_size = _setting("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 4096)
        self.queue_size = max(_setting("OTEL_BSP_MAX_QUEUE_SIZE", 16384), self.batch_size)
        self.delay = _setting("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self.dropped = 0
        self.encode_batch = min(ENCODE_BATCH, self.batch_size)
        self.quiet = quiet
        self.quiet_apart = quiet_apart
        self._ended: deque[DeferredSpan] = deque()  # not yet encoded
        self._spans: deque[bytes] = deque()  # encoded spans
        self._wake = threading.Event()
        # one batch at a time, the thread's or a flush's, and one encoding of the ended spans
        self._sending = threading.Lock()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="pauta-attempt-spans", daemon=True)
        self._thread.start()
        atexit.register(self.shutdown)

    def serves(self, tracer: Tracer) -> bool:
        return tracer.span_processor._span_processors is self._processors

    def add(self, span: DeferredSpan) -> None:
        """Take an ended span (the sink's thread encodes it with the others ended since),
        unless ``queue_size`` spans wait already: then it is dropped and counted."""
        ended = self._ended
        if len(ended) + len(self._spans) >= self.queue_size:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 10_000 == 0:
                log.warning("attempt spans dropped: %d (the exporter cannot keep up)", self.dropped)
            return
        ended.append(span)
        if len(ended) == self.encode_batch:
            self._wake.set()
        elif len(ended) == 1 and not self._spans and self.quiet is not None:
            self._wake.set()  # the first span waiting: the thread starts watching for a lull

    def _encode(self) -> None:
        """Encode the spans ended so far, in the order they ended (one that cannot be encoded
        is logged and left out)."""
        ended, spans = self._ended, self._spans
        with self._sending:
            for _ in range(len(ended)):
                span = ended.popleft()
                try:
                    spans.append(encode_unchanged(span))
                except Exception:  # a span that cannot be encoded must not stop the others
                    log.exception("could not encode the span of an attempt; it is not exported")

    def _run(self) -> None:
        """Encode the ended spans whenever ``encode_batch`` of them wait; send full batches as
        they fill, and what is left once no span has ended for ``quiet`` seconds (a few spans
        at most once every ``quiet_apart``) or the delay has passed since the last time
        everything was sent (a batch a request: a request costs the exporter's HTTP client
        about as much Python as encoding a few hundred spans)."""
        deadline = time.monotonic() + self.delay
        quiet_from = 0.0  # when the next send of a few spans for a lull may be made
        while True:
            now = time.monotonic()
            timeout = deadline - now
            waiting = len(self._ended) + len(self._spans)
            watching = self.quiet is not None and waiting > 0
            if watching:
                few = waiting < ENCODE_BATCH
                timeout = min(timeout, max(self.quiet or 0.0, quiet_from - now if few else 0.0))
            lull = False
            if timeout > 0 and len(self._ended) < self.encode_batch and not self._closing:
                # not woken, and no span ended while waiting: the spans have stopped coming
                lull = not self._wake.wait(timeout) and watching and not self._ended
                self._wake.clear()
            self._encode()
            closing = self._closing
            now = time.monotonic()
            few = len(self._spans) < ENCODE_BATCH
            lull = lull and (now >= quiet_from or not few)
            everything = closing or lull or now >= deadline
            self._send(everything)
            if everything:
                deadline = now + self.delay
            if lull and few:
                quiet_from = now + self.quiet_apart
            if closing:
                return

    def _send(self, everything: bool) -> None:
        """Send the full batches waiting, and with ``everything`` the last part batch too."""
        spans = self._spans
        size = self.batch_size
        with self._sending:
            while len(spans) >= size or (everything and spans):
                batch = [spans.popleft() for _ in range(min(len(spans), size))]
                try:
                    self.exporter.export_encoded(
                        partial(encode_scope_spans, self.resource, self.scope, batch), len(batch)
                    )
                except Exception:  # the next batch may get through: the thread goes on
                    log.exception("could not send a batch of %d attempt spans", len(batch))

    def force_flush(self) -> None:
        """Send what is waiting, now, in the caller's thread."""
        self._encode()
        self._send(everything=True)

    def shutdown(self) -> None:
        """Send what is left, stop the thread and the exporter; once."""
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._thread.join(30)
        self.exporter.shutdown()  # type: ignore[no-untyped-call]
