"""Finished spans as the bytes of an OTLP ``ExportTraceServiceRequest``, written directly.

The OTLP exporter's own encoder (``encode_spans`` of opentelemetry-exporter-otlp-proto-common)
builds a protobuf message object for every span, attribute and value before serializing them:
69 µs a span on this machine, in the worker process and under its GIL, more than making the
span (40 µs). This writes the same bytes field by field: the same fields, in the same order,
with proto3's rule that a field holding its default is left out, so that the official decoder
reads back what the official encoder would have sent (``tests/jobqueue/test_otlp_encoding.py``
compares the two byte for byte). The parts that are rare or carry no per-span cost (events,
attribute values other than text and numbers, the resource, the instrumentation scope) go
through the official encoder's functions. :class:`SpanExporter` is the OTLP/HTTP exporter
with this encoder (``http/protobuf``, the default protocol; gRPC sends message objects, and
keeps the official encoder).
"""

import logging
import struct
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_key_value,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import (
    _encode_events,
    _encode_trace_state,
    _span_flags,
)
from opentelemetry.exporter.otlp.proto.http._common import (
    RequestPayloadTooLargeError,
    _is_request_too_large,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.semconv.attributes.http_attributes import HTTP_RESPONSE_STATUS_CODE
from opentelemetry.trace import SpanContext, SpanKind
from opentelemetry.trace.span import DEFAULT_TRACE_STATE

from jobqueue.attempt_span import bounded_links

if TYPE_CHECKING:
    from jobqueue.attempt_span import DeferredSpan

log = logging.getLogger(__name__)

_SMALL = [bytes((n,)) for n in range(0x80)]
_DOUBLE = struct.Struct("<d")
_FIXED64 = struct.Struct("<Q")
_FIXED32 = struct.Struct("<I")


def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return _SMALL[value]
    if value < 0:
        value += 1 << 64  # int64 as protobuf writes it: two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: its tag, the payload's length, the payload."""
    return tag + _varint(len(payload)) + payload


def _text(tag: bytes, text: str | None) -> bytes:
    """A string field, left out when empty (proto3)."""
    return _field(tag, text.encode()) if text else b""


def _count(tag: bytes, value: int) -> bytes:
    return tag + _varint(value) if value else b""


def _any_value(value: Any) -> bytes | None:
    """AnyValue for text and numbers (a oneof: written even when it holds its default)."""
    kind = type(value)
    if kind is str:
        return _field(b"\x0a", value.encode())
    if kind is bool:
        return b"\x10\x01" if value else b"\x10\x00"
    if kind is int:
        return b"\x18" + _varint(value)
    if kind is float:
        return b"\x21" + _DOUBLE.pack(value)
    return None


def _pair(key: str, value: Any) -> bytes:
    """A KeyValue; anything but text and numbers through the official encoder."""
    encoded = _any_value(value)
    if encoded is None:
        official: bytes = _encode_key_value(key, value).SerializePartialToString()
        return official
    return _text(b"\x0a", key) + _field(b"\x12", encoded)


# Attribute fields by (field tag, key, type, value): a queue's, a task's, a tenant's attributes
# repeat from span to span. Bounded: emptied when it grows past the limit (a job's id never
# repeats). The type is part of the key because 1, 1.0 and True are equal keys of a dict.
_framed: dict[tuple[bytes, str, type, Any], bytes] = {}
_FRAMED_LIMIT = 4096


def _attribute(tag: bytes, key: str, value: Any) -> bytes:
    cache_key = (tag, key, type(value), value)
    try:
        return _framed[cache_key]
    except KeyError:
        pass
    except TypeError:  # a list: not hashable, not kept
        return _framed_pair(tag, key, value)
    framed = _framed_pair(tag, key, value)
    if len(_framed) >= _FRAMED_LIMIT:
        _framed.clear()
    _framed[cache_key] = framed
    return framed


def _framed_pair(tag: bytes, key: str, value: Any) -> bytes:
    """The attribute's field; one that cannot be encoded (text with a lone surrogate) is left
    out and logged, as the official encoder does, and the span goes on without it."""
    try:
        return _field(tag, _pair(key, value))
    except Exception:
        log.exception("Failed to encode key %s", key)
        return b""


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    """Repeated KeyValue fields."""
    if not attributes:
        return b""
    return b"".join([_attribute(tag, key, value) for key, value in attributes.items()])


# Encoded leading attributes, by the id of the shared dict (kept, so that the id stays its).
_leading: dict[int, tuple[Mapping[str, Any], bytes]] = {}


_LOCAL_FLAGS = _FIXED32.pack(_span_flags(None))
_REMOTE_FLAGS = _FIXED32.pack(_span_flags(SpanContext(1, 1, is_remote=True)))
_KIND = {
    kind: b"\x30" + _varint(number)
    for kind, number in (
        (SpanKind.INTERNAL, 1),
        (SpanKind.SERVER, 2),
        (SpanKind.CLIENT, 3),
        (SpanKind.PRODUCER, 4),
        (SpanKind.CONSUMER, 5),
    )
}
_UNSET_STATUS = b"\x7a\x00"


def _flags(context: SpanContext | None) -> bytes:
    return _REMOTE_FLAGS if context is not None and context.is_remote else _LOCAL_FLAGS


def _trace_state(tag: bytes, state: Any) -> bytes:
    return _text(tag, _encode_trace_state(state)) if state else b""


def _links(links: Sequence[Any]) -> bytes:
    out = []
    for link in links:
        context = link.context
        body = (
            b"\x0a\x10"
            + context.trace_id.to_bytes(16, "big")
            + b"\x12\x08"
            + context.span_id.to_bytes(8, "big")
            + _attributes(b"\x22", link.attributes)
            + _count(b"\x28", link.dropped_attributes)
            + b"\x35"
            + _flags(context)
        )
        out.append(_field(b"\x6a", body))
    return b"".join(out)


def _status(status: Any) -> bytes:
    if status is None:
        return b""
    if status.description is None and status.status_code.value == 0:
        return _UNSET_STATUS
    body = _text(b"\x12", status.description) + _count(b"\x18", status.status_code.value)
    return _field(b"\x7a", body)


def _span(span: ReadableSpan) -> bytes:
    context: SpanContext = span.get_span_context()  # type: ignore[assignment]
    parent = span.parent
    parts = [
        b"\x0a\x10",
        context.trace_id.to_bytes(16, "big"),
        b"\x12\x08",
        context.span_id.to_bytes(8, "big"),
        _trace_state(b"\x1a", context.trace_state),
        b"\x22\x08" + parent.span_id.to_bytes(8, "big") if parent else b"",
        _text(b"\x2a", span.name),
        _KIND[span.kind],
        b"\x39" + _FIXED64.pack(span.start_time) if span.start_time else b"",
        b"\x41" + _FIXED64.pack(span.end_time) if span.end_time else b"",
        _attributes(b"\x4a", span.attributes),
        _count(b"\x50", span.dropped_attributes),
    ]
    if span.events:
        parts += [
            _field(b"\x5a", event.SerializePartialToString())
            for event in _encode_events(span.events) or []
        ]
    parts += [
        _count(b"\x60", span.dropped_events),
        _links(span.links) if span.links else b"",
        _count(b"\x70", span.dropped_links),
        _status(span.status),
        b"\x85\x01",
        _flags(parent),
    ]
    return b"".join(parts)


_NAMED: dict[str, tuple[SpanKind, bytes]] = {}  # a span's kind, and its name and kind fields
_KEYS: dict[str, bytes] = {}  # a KeyValue's key field, by key
_SMALL_INTS: dict[tuple[str, int], bytes] = {}  # an attribute's field, by key and small int
_TIMES = struct.Struct("<BQBQ")  # start and end: their tags and fixed64 values
_UNCHANGED_END = _UNSET_STATUS + b"\x85\x01" + _LOCAL_FLAGS
# a link field of 33 bytes: ids (2 + 16, 2 + 8) and flags (1 + 4); then its trace id
_UNCHANGED_LINK = b"\x6a\x21\x0a\x10"
# the trace id's tag and length, then after it the span id's: the fields of valid ids (16 and
# 8 bytes) are written as one number of 28 bytes, these tags or'ed with the ids shifted in place
_IDS_TAGS = 0x0A10 << 208 | 0x1208 << 64


def _ids_out_of_range(context: SpanContext) -> bytes:
    """The ids' fields as the official encoder writes them whatever they hold (ids past their
    16 and 8 bytes make it raise)."""
    return (
        b"\x0a\x10"
        + context.trace_id.to_bytes(16, "big")
        + b"\x12\x08"
        + context.span_id.to_bytes(8, "big")
    )


def encode_unchanged(span: "DeferredSpan") -> bytes:
    """The ``spans`` field (framed) :func:`encode_spans` writes for the AttemptSpan a deferred
    span stands for, which nothing changed: no parent, events or dropped attributes, an unset
    status, local flags; the attributes after its shared leading ones written here directly
    when they are text or whole numbers, as :func:`_any_value` writes them, and links without
    attributes too (what ``bounded_links`` and :func:`_links` would make of them)."""
    # the context's fields by position: its properties are Python calls, four a span
    trace_id, span_id, _, _, state, valid = span.span_context
    name, kind = span.name, span.kind
    known_name = _NAMED.get(name)
    if known_name is None or known_name[0] is not kind:
        if len(_NAMED) >= _FRAMED_LIMIT:
            _NAMED.clear()
        known_name = _NAMED[name] = (kind, _text(b"\x2a", name) + _KIND[kind])
    named = known_name[1]
    if state is not DEFAULT_TRACE_STATE and state:
        named = _trace_state(b"\x1a", state) + named
    parts = [
        (_IDS_TAGS | trace_id << 80 | span_id).to_bytes(28, "big")
        if valid
        else _ids_out_of_range(span.span_context),
        named,
        _TIMES.pack(0x39, span.start_time, 0x41, span.end_time or 0),
    ]
    append = parts.append
    leading = span.leading
    if leading is None:
        append(_attributes(b"\x4a", span.own))
    else:
        known = _leading.get(id(leading))
        if known is None or known[0] is not leading:
            if len(_leading) >= _FRAMED_LIMIT:
                _leading.clear()
            known = _leading[id(leading)] = (leading, _attributes(b"\x4a", leading))
        append(known[1])
        own: Mapping[str, Any] = span.own
        for key, value in own.items():
            value_type = type(value)
            if value_type is int and 0 <= value < 0x80:
                field = _SMALL_INTS.get((key, value))
                if field is None:
                    if len(_SMALL_INTS) >= _FRAMED_LIMIT:
                        _SMALL_INTS.clear()
                    field = _SMALL_INTS[key, value] = _framed_pair(b"\x4a", key, value)
                append(field)
                continue
            if not (value_type is str and len(value) < 0x7E and value.isascii()):  # framed: < 0x80
                append(_framed_pair(b"\x4a", key, value))
                continue
            key_field = _KEYS.get(key)
            if key_field is None:
                if len(_KEYS) >= _FRAMED_LIMIT:
                    _KEYS.clear()
                key_field = _KEYS[key] = _text(b"\x0a", key) + b"\x12"
            length = len(value)
            pair = key_field + _SMALL[length + 2] + b"\x0a" + _SMALL[length] + value.encode()
            size = len(pair)
            append(b"\x4a" + (_SMALL[size] if size < 0x80 else _varint(size)) + pair)
    if span.links:
        append(_unchanged_links(span.links, span.tracer._span_limits))
    append(_UNCHANGED_END)
    body = b"".join(parts)
    size = len(body)
    if 0x80 <= size < 0x4000:  # an attempt's span: its length in two bytes, written here
        return b"\x12" + bytes((size & 0x7F | 0x80, size >> 7)) + body
    return b"\x12" + _varint(size) + body


def _unchanged_links(links: Sequence[Any], limits: Any) -> bytes:
    """The links field of a deferred span: a link without attributes written here directly
    (an attempt's link to its enqueuing span has none), others as an SDK span keeps them."""
    out = []
    for link in links:
        context = link.context
        if link.attributes or not context:
            out.append(_links(bounded_links([link], limits)))
        elif context.is_valid or context.trace_state:
            out.append(
                _UNCHANGED_LINK
                + context.trace_id.to_bytes(16, "big")
                + b"\x12\x08"
                + context.span_id.to_bytes(8, "big")
                + b"\x35"
                + (_REMOTE_FLAGS if context.is_remote else _LOCAL_FLAGS)
            )
    return b"".join(out)


def encode_scope_spans(
    resource: Resource, scope: InstrumentationScope, spans: list[bytes]
) -> bytes:
    """A request of spans already encoded (framed), all of one resource and scope."""
    return _resource_spans(resource, [(scope, spans)])


def _resource_spans(resource: Resource, scopes: Iterable[tuple[Any, list[bytes]]]) -> bytes:
    scope_spans = []
    for scope, encoded in scopes:
        body = _field(b"\x0a", _encode_instrumentation_scope(scope).SerializePartialToString())
        body += b"".join(encoded)
        body += _text(b"\x1a", scope.schema_url if scope else None)
        scope_spans.append(_field(b"\x12", body))
    body = _field(b"\x0a", _encode_resource(resource).SerializePartialToString())
    body += b"".join(scope_spans) + _text(b"\x1a", resource.schema_url)
    return _field(b"\x0a", body)


def encode_spans(spans: Sequence[ReadableSpan]) -> bytes:
    """What ``encode_spans(spans).SerializePartialToString()`` of the OTLP exporter returns:
    spans grouped by resource, then by instrumentation scope, in the order first seen."""
    grouped: dict[Any, dict[Any, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    # by object first: a Resource's hash serializes its attributes to JSON, every time
    by_id: dict[tuple[int, int], list[bytes]] = {}
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope or None
        group = by_id.get((id(resource), id(scope)))
        if group is None:
            group = by_id[(id(resource), id(scope))] = grouped[resource][scope]
        group.append(_field(b"\x12", _span(span)))
    return b"".join(
        _resource_spans(resource, scopes.items()) for resource, scopes in grouped.items()
    )


class SpanExporter(OTLPSpanExporter):
    """The OTLP/HTTP span exporter, with its batches encoded by :func:`encode_spans`.

    ``export`` is the library's own (opentelemetry-exporter-otlp-proto-http, pinned), line for
    line, with the encoder swapped: the same size limit, retries, metrics and failure results.
    tests/test_telemetry_end_to_end.py sends through it to a real receiver."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return self.export_encoded(partial(encode_spans, spans), len(spans))

    def export_encoded(self, encode: Callable[[], bytes], count: int) -> SpanExportResult:
        """Send the request ``encode`` writes, of ``count`` spans."""
        if self._shutdown:
            log.warning("Exporter already shutdown, ignoring batch")
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(count) as result:
            try:
                serialized = encode()
            except Exception as error:
                log.exception("Failed to encode span batch")
                result.error = error
                return SpanExportResult.FAILURE
            if _is_request_too_large(serialized, self._max_request_size):
                log.warning(
                    "Dropping span batch: serialized size %d bytes exceeds max_request_size %d",
                    len(serialized),
                    self._max_request_size,
                )
                result.error = RequestPayloadTooLargeError(
                    f"Serialized span request size {len(serialized)} bytes exceeds "
                    f"max_request_size {self._max_request_size} bytes."
                )
                return SpanExportResult.FAILURE
            answer = self._client.export(serialized)
            if not answer.success:
                result.error = answer.error
                result.error_attrs = (
                    {HTTP_RESPONSE_STATUS_CODE: answer.status_code}
                    if answer.status_code is not None
                    else None
                )
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
