"""Traces: one span per execution slice and per step, linked to the request that started it."""

from pathlib import Path
from typing import Any

import psycopg
from opentelemetry import trace

from tests.support.db import scalar
from tests.support.telemetry import memory_telemetry
from tests.workflows.conftest import Slices
from workflows import start_workflow

Conn = psycopg.Connection[Any]


def test_each_slice_and_step_is_a_span_linked_to_the_starting_request(
    wf_conn: Conn, slices: Slices, effects_file: Path
) -> None:
    spans = memory_telemetry()
    with trace.get_tracer("test").start_as_current_span("POST /cycles/1/activate") as request:
        eid = start_workflow(wf_conn, "five_steps", {"n": 1}).execution_id
    request_trace = request.get_span_context().trace_id
    slices.run_visible()
    stored = scalar(wf_conn, "SELECT trace_context FROM workflow_executions WHERE id = %s", eid)
    assert f"{request_trace:032x}" in stored["traceparent"]
    (slice_span,) = spans.finished("workflow five_steps")
    assert slice_span.attributes["pauta.workflow.execution_id"] == eid
    (attempt,) = spans.finished("process workflow.run")
    assert slice_span.parent.span_id == attempt.context.span_id
    assert [link.context.trace_id for link in attempt.links] == [request_trace]
    steps = [s for s in spans.finished() if s.name.startswith("step ")]
    assert [s.name for s in steps] == [
        "step ledger-1", "step effect-2", "step ledger-3", "step effect-4", "step ledger-5",
    ]  # fmt: skip
    assert {s.parent.span_id for s in steps} == {slice_span.context.span_id}
    assert [s.attributes["pauta.workflow.step_id"] for s in steps] == [0, 1, 2, 3, 4]
