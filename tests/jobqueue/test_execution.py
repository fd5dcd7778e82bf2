"""How one attempt is classified, with a registry of fake tasks (no database)."""

import contextvars
import logging
import math
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry import baggage, context, trace

from jobqueue import PermanentError, RetryPolicy, TaskRegistry, telemetry
from jobqueue.execution import AttemptControl, JobContext, run_job
from jobqueue.store import ClaimedJob
from tests.support.telemetry import memory_telemetry

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def claimed(task: str, payload: object, attempt: int = 1) -> ClaimedJob:
    return ClaimedJob(7, 1, "default", task, payload, 0, attempt, 5, NOW, NOW)


def registry_with_tasks() -> TaskRegistry:
    tasks = TaskRegistry()

    @tasks.task("add")
    def add(a: int, b: int) -> int:
        return a + b

    @tasks.task("explode", retry=RetryPolicy(base_seconds=4, rng=lambda: 1.0))
    def explode() -> None:
        raise KeyError("missing")

    @tasks.task("refuse")
    def refuse() -> None:
        raise PermanentError("never")

    @tasks.task("context", pass_context=True)
    def context(ctx: JobContext, expected: int) -> None:
        assert ctx.job_id == expected

    return tasks


def run(task: str, payload: object, attempt: int = 1):  # type: ignore[no-untyped-def]
    return run_job(claimed(task, payload, attempt), registry_with_tasks(), "w1", nullcontext)


def test_success() -> None:
    result = run("add", {"a": 1, "b": 2})
    assert (result.outcome, result.error, result.job_id, result.attempt) == (
        "succeeded",
        None,
        7,
        1,
    )
    assert result.duration >= 0


def test_unknown_task_is_dead_with_the_reason() -> None:
    result = run("nope", {})
    assert result.outcome == "dead"
    assert result.error == "UnknownTask: no task named 'nope' is registered in this worker"


def test_payload_that_does_not_fit_the_signature_is_dead() -> None:
    result = run("add", {"a": 1})
    assert result.outcome == "dead"
    assert result.error is not None
    assert result.error.startswith("InvalidPayload: payload does not fit task 'add'")
    assert "'b'" in result.error


def test_payload_that_is_not_an_object_is_dead() -> None:
    result = run("add", [1, 2])
    assert result.outcome == "dead"
    assert result.error == "InvalidPayload: task 'add' takes a JSON object as payload, not list"


def test_exception_fails_with_the_policy_delay_and_a_traceback() -> None:
    result = run("explode", {}, attempt=3)
    assert result.outcome == "failed"
    assert result.error == "KeyError: 'missing'"
    assert result.retry_delay == 16.0
    assert result.traceback is not None and "raise KeyError" in result.traceback


def test_permanent_error_is_dead_at_once() -> None:
    result = run("refuse", {})
    assert (result.outcome, result.error) == ("dead", "PermanentError: never")


def test_context_is_passed_first() -> None:
    assert run("context", {"expected": 7}).outcome == "succeeded"
    assert run("context", {"expected": 8}).outcome == "failed"


def test_an_attempt_left_out_by_the_sampler_stores_no_trace_id() -> None:
    """A trace id is stored only for an attempt whose span is exported, so that every stored
    id names a trace that exists (a ratio sampler leaves most attempts out).
    kills: trace-id-of-unsampled-attempt"""
    memory_telemetry()
    tasks = TaskRegistry()

    @tasks.task("noop")
    def noop() -> None: ...

    sampled = run_job(claimed("noop", {}), tasks, "w1", nullcontext)
    assert sampled.trace_id is not None and len(sampled.trace_id) == 32
    left_out = trace.NonRecordingSpan(
        trace.SpanContext(0x1234, 0x5678, is_remote=False, trace_flags=trace.TraceFlags(0))
    )
    assert telemetry.trace_id_of(left_out) is None


def test_each_attempts_result_names_the_trace_of_its_own_span() -> None:
    """The trace id stored with an attempt is its exported span's, whatever the attempt ended
    with (succeeded, failed, dead, unknown task), and the span is current only while it runs.
    kills: attempt-trace-id-dropped-on-success, attempt-trace-id-dropped-on-failure,
    consumer-span-left-current"""
    installed = memory_telemetry()
    tasks = registry_with_tasks()
    seen: list[trace.Span] = []

    @tasks.task("look")
    def look() -> None:
        seen.append(trace.get_current_span())

    results = [
        run_job(claimed(name, payload), tasks, "w1", nullcontext)
        for name, payload in (("look", {}), ("explode", {}), ("refuse", {}), ("nowhere", {}))
    ]
    spans = installed.spans.get_finished_spans()
    assert [span.name for span in spans] == [
        "process look", "process explode", "process refuse", "process nowhere"
    ]  # fmt: skip
    assert [result.outcome for result in results] == ["succeeded", "failed", "dead", "dead"]
    assert [result.trace_id for result in results] == [
        trace.format_trace_id(span.context.trace_id) for span in spans
    ]
    assert seen[0].get_span_context() == spans[0].context  # current while the task ran
    assert not trace.get_current_span().get_span_context().is_valid  # and not after


def test_an_attempts_span_is_current_beside_what_the_threads_context_held() -> None:
    """While the task runs, the current context is the thread's with the attempt's span added
    (a baggage entry the thread had is still there); after it, the thread's again.
    kills: attempt-context-drops-entries, consumer-span-left-current"""
    installed = memory_telemetry()
    tasks = registry_with_tasks()
    seen: list[tuple[trace.Span, object]] = []

    @tasks.task("look")
    def look() -> None:
        seen.append((trace.get_current_span(), baggage.get_baggage("tenant.region")))

    token = context.attach(baggage.set_baggage("tenant.region", "sul"))
    try:
        run_job(claimed("look", {}), tasks, "w1", nullcontext)
        after = context.get_current()
    finally:
        context.detach(token)
    [span] = installed.spans.get_finished_spans()
    assert seen == [(seen[0][0], "sul")]
    assert seen[0][0].get_span_context() == span.context
    assert baggage.get_baggage("tenant.region", after) == "sul"
    assert not trace.get_current_span(after).get_span_context().is_valid


def test_each_attempts_span_is_named_after_its_task_whatever_ran_before_in_its_queue() -> None:
    """Two tasks of one queue and tenant, one after the other and back: each attempt's span is
    ``process`` and its own task's name, with the queue and task among its attributes.
    kills: attempt-span-name-kept-by-queue"""
    installed = memory_telemetry()
    tasks = registry_with_tasks()
    for task, payload in (("add", {"a": 1, "b": 2}), ("explode", {}), ("add", {"a": 3, "b": 4})):
        run_job(claimed(task, payload), tasks, "w1", nullcontext)
    spans = installed.spans.get_finished_spans()
    assert [span.name for span in spans] == ["process add", "process explode", "process add"]
    assert [(span.attributes or {}).get("pauta.task") for span in spans] == [
        "add",
        "explode",
        "add",
    ]
    assert {(span.attributes or {}).get("messaging.destination.name") for span in spans} == {
        "default"
    }


def test_a_task_that_leaves_a_context_attached_does_not_leave_it_to_the_next_attempt() -> None:
    """Task code that attaches a context and never detaches it: the attempt still succeeds,
    and after it the thread's context is the runner's again, with neither the task's baggage
    nor the attempt's span; the next attempt on the thread starts from it.
    kills: consumer-span-left-current"""
    installed = memory_telemetry()
    tasks = registry_with_tasks()
    seen: list[object] = []

    @tasks.task("leak")
    def leak() -> None:
        seen.append(baggage.get_baggage("left.behind"))
        context.attach(baggage.set_baggage("left.behind", "yes"))

    first = run_job(claimed("leak", {}), tasks, "w1", nullcontext)
    after = context.get_current()
    second = run_job(claimed("leak", {}), tasks, "w1", nullcontext)
    assert (first.outcome, second.outcome) == ("succeeded", "succeeded")
    assert seen == [None, None]
    assert baggage.get_baggage("left.behind", after) is None
    assert not trace.get_current_span(after).get_span_context().is_valid
    assert len(installed.spans.get_finished_spans()) == 2


def test_a_context_token_that_cannot_be_reset_is_logged_and_the_runner_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A token made in another context (a span entered in one and left in another) cannot
    reset this one: as the API's own detach, that is logged, not raised into the runner's
    thread, and the current context is left as it was.
    kills: detach-raises"""
    foreign = contextvars.copy_context().run(
        lambda: context.attach(baggage.set_baggage("elsewhere", "1"))
    )
    before = context.get_current()
    with caplog.at_level(logging.ERROR, logger="jobqueue.telemetry"):
        telemetry._detach(foreign)
    assert context.get_current() is before
    assert [r.getMessage() for r in caplog.records] == ["Failed to detach context"]


def test_an_attempt_links_to_its_enqueuing_span_and_runs_whatever_its_row_holds_there() -> None:
    """The link comes from the row's stored trace context; a row written by hand with something
    else there (a number, a list, text) runs without a link instead of failing the runner's
    thread at every retry.
    kills: enqueuing-link-trusts-the-row"""
    installed = memory_telemetry()
    tasks = registry_with_tasks()
    stored = "00-e4bd918829d006f55f6bcb1ee1ad8731-ff8a3623eb0c3d78-01"
    contexts: list[object] = [{"traceparent": stored}, {"traceparent": 5}, [1, 2], "x"]
    results = [
        run_job(
            claimed("add", {"a": 1, "b": 2})._replace(trace_context=context),
            tasks,
            "w1",
            nullcontext,
        )
        for context in contexts
    ]
    assert [result.outcome for result in results] == ["succeeded"] * 4
    links = [span.links for span in installed.spans.get_finished_spans()]
    assert [[(link.context.trace_id, link.context.span_id) for link in each] for each in links] == [
        [(0xE4BD918829D006F55F6BCB1EE1AD8731, 0xFF8A3623EB0C3D78)], [], [], []
    ]  # fmt: skip


def test_an_attempts_deadline_is_its_start_by_the_wall_clock_plus_its_timeout() -> None:
    """A worker's attempt ends at its start plus its timeout, by the wall clock, whatever the
    monotonic clock reads; a context built outside a worker never ends and is never cancelled.
    kills: attempt-control-deadline-by-monotonic-clock, attempt-control-endless-overflows"""
    before = datetime.now(UTC)
    control = AttemptControl.start(30.0)
    after = datetime.now(UTC)
    context = JobContext(claimed("add", {}), "w1", nullcontext, control)
    assert before + timedelta(seconds=30) <= context.deadline <= after + timedelta(seconds=30)
    assert 29 < context.remaining() <= 30
    endless = JobContext(claimed("add", {}), "w1", nullcontext)
    assert endless.deadline == datetime.max.replace(tzinfo=UTC)
    assert endless.remaining() == math.inf
    assert not endless.cancel_requested


def test_the_job_a_task_is_handed_cannot_be_changed() -> None:
    """The runner writes the result by the job's id and attempt (its fence): a task that
    assigns to ``ctx.job`` or the attempt's control must not move them."""
    context = JobContext(claimed("add", {}), "w1", nullcontext, AttemptControl.start(30.0))
    for target, name, value in ((context.job, "attempt", 9), (context.control, "timeout", 1e9)):
        with pytest.raises(AttributeError):
            setattr(target, name, value)
    assert (context.job.attempt, context.control.timeout) == (1, 30.0)
