"""The link from an attempt's span to its enqueuing span: read from the job's stored trace
context as the W3C propagator reads it, whatever the row holds (no database)."""

import json
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from opentelemetry import trace

from jobqueue import telemetry
from jobqueue.telemetry import enqueuing_links, enqueuing_span_context

HEX = "0123456789abcdef"


def by_the_propagator(carrier: dict[str, Any]) -> trace.SpanContext | None:
    span_context = trace.get_current_span(telemetry._propagator.extract(carrier)).get_span_context()
    return span_context if span_context.is_valid else None


def hex_text(length: int) -> st.SearchStrategy[str]:
    # mostly well-formed, sometimes all zeros (no span), sometimes with a character out of place
    well_formed = st.text(alphabet=HEX, min_size=length, max_size=length)
    return st.one_of(
        well_formed,
        well_formed,
        st.just("0" * length),
        well_formed.map(str.upper),
        st.text(alphabet=HEX + "ABCDEFxg -+_", min_size=length - 1, max_size=length + 1),
    )


traceparents = st.builds(
    lambda version, trace_id, span_id, flags, suffix, pad: (
        f"{pad}{version}-{trace_id}-{span_id}-{flags}{suffix}{pad}"
    ),
    st.sampled_from(["00", "00", "00", "01", "ff", "0g", "0"]),
    hex_text(32),
    hex_text(16),
    hex_text(2),
    st.sampled_from(["", "", "", "-", "-extra", "-00"]),
    st.sampled_from(["", "", "", " ", "\t"]),
)
# exactly what the producer stores, the form read without the propagator
stored_traceparents = st.builds(
    lambda trace_id, span_id, flags: f"00-{trace_id}-{span_id}-{flags}",
    st.text(alphabet=HEX, min_size=32, max_size=32),
    st.text(alphabet=HEX, min_size=16, max_size=16),
    st.sampled_from(["00", "01", "03"]),
)
carriers = st.one_of(
    st.builds(lambda parent: {"traceparent": parent}, stored_traceparents),
    st.builds(lambda parent: {"traceparent": parent}, traceparents),
    st.builds(
        lambda parent, state: {"traceparent": parent, "tracestate": state},
        traceparents,
        st.sampled_from(["", "vendor=value", "a=1,b=2", "bad state", "k=" + "v" * 600]),
    ),
    st.builds(lambda parent: {"Traceparent": parent}, traceparents),
    st.just({}),
)


@settings(max_examples=600, deadline=None)
@given(carriers)
@example({"traceparent": "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"})
@example({"traceparent": "ff-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"})
@example({"traceparent": "01-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"})
@example({"traceparent": "00-E4BD918829D006F55F6BCB1EE1AD8731-ff8a3623eb0c3d78-01"})
@example({"traceparent": "00-00000000000000000000000000000000-ff8a3623eb0c3d78-01"})
@example({"traceparent": "00-e4bd918829d006f55f6bcb1ee1ad8731-0000000000000000-01"})
@example({"traceparent": " 00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"})
@example({"traceparent": "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01-extra"})
def test_the_link_is_the_span_the_propagator_finds(carrier: dict[str, Any]) -> None:
    """kills: enqueuing-link-any-version, enqueuing-link-zero-ids, enqueuing-link-local"""
    assert enqueuing_span_context(carrier) == by_the_propagator(carrier)


def test_what_the_producer_stores_is_read_directly() -> None:
    carrier = {"traceparent": "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"}
    span_context = enqueuing_span_context(carrier)
    assert span_context == trace.SpanContext(
        0xE4BD918829D006F55F6BCB1EE1AD8731,
        0xFF8A3623EB0C3D78,
        is_remote=True,
        trace_flags=trace.TraceFlags(1),
    )
    assert span_context.trace_state == by_the_propagator(carrier).trace_state  # type: ignore[union-attr]


def linked_to(links: tuple[Any, ...]) -> list[trace.SpanContext]:
    return [link.context for link in links]


@settings(max_examples=300, deadline=None)
@given(st.lists(carriers, min_size=1, max_size=6))
@example(
    [
        {"traceparent": "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"},
        {
            "traceparent": "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01",
            "tracestate": "vendor=value",
        },
    ]
)
def test_an_attempts_links_name_the_span_its_own_trace_context_names(
    sequence: list[dict[str, Any]],
) -> None:
    """Read once a traceparent and then shared, they are still each job's own: asked in any
    order, again and again, each trace context gives the span the propagator finds in it.
    kills: enqueuing-links-cache-ignores-tracestate"""
    for carrier in sequence + sequence[::-1] + sequence:
        expected = by_the_propagator(carrier)
        assert linked_to(enqueuing_links(carrier)) == ([] if expected is None else [expected])


def test_jobs_enqueued_together_share_one_link_and_a_tracestate_is_not_mistaken_for_none() -> None:
    """kills: enqueuing-links-cache-ignores-tracestate"""
    parent = "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"
    first = enqueuing_links({"traceparent": parent})
    assert enqueuing_links({"traceparent": parent}) is first  # read once for a batch
    with_state = {"traceparent": parent, "tracestate": "vendor=value"}
    [link] = enqueuing_links(with_state)
    assert link.context == by_the_propagator(with_state)
    assert link.context.trace_state == trace.TraceState([("vendor", "value")])
    assert enqueuing_links({"traceparent": parent}) is first
    assert enqueuing_links({"traceparent": parent.upper()}) == ()
    assert enqueuing_links({}) == () and enqueuing_links({"traceparent": 5}) == ()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=8,
)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        json_values,
        st.dictionaries(st.sampled_from(["traceparent", "tracestate"]), json_values),
        st.builds(
            lambda parent, state: {"traceparent": parent, "tracestate": state},
            traceparents,
            json_values,
        ),
    )
)
@example({"traceparent": 5})
@example({"traceparent": 5, "tracestate": "vendor=value"})
@example([1, 2])
def test_a_stored_value_that_is_no_trace_context_names_no_span(stored: Any) -> None:
    """A row written by hand may hold any JSON there: the attempt then has no link, and the
    runner's thread does not fail on it.
    kills: enqueuing-link-trusts-the-row"""
    value = json.loads(json.dumps(stored))  # what the jsonb column gives back
    found = enqueuing_span_context(value)
    assert found is None or (isinstance(found, trace.SpanContext) and found.is_valid)
