"""Request and job telemetry, with in-memory exporters: span names, who asked, trace context
carried from the request into the job's attempt."""

from typing import Any

import psycopg
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jobqueue import JobStore
from jobqueue.execution import run_job
from jobqueue.registry import registry
from models.people import Role
from tests.support.factories import (
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    post_form,
    seeding,
)
from tests.support.telemetry import MemoryTelemetry, memory_telemetry


@pytest.fixture
def spans() -> MemoryTelemetry:
    return memory_telemetry()


@pytest.fixture
def instrumented_app(spans: MemoryTelemetry, app: Any) -> Any:
    """The app, created once telemetry is on (so it is instrumented)."""
    return app


def server_spans(spans: MemoryTelemetry) -> list[Any]:
    return [s for s in spans.finished() if s.kind == SpanKind.SERVER]


def test_spans_are_named_by_route_pattern_and_a_404_by_method(
    spans: MemoryTelemetry, instrumented_app: Any
) -> None:
    with seeding(instrumented_app) as session:
        tenant = make_tenant(session)
        admin = make_user(session, tenant, Role.HR_ADMIN)
        first, second = (make_cycle(session, tenant) for _ in range(2))
    client = instrumented_app.test_client()
    login_as(client, admin)
    spans.spans.clear()
    assert client.get(f"/cycles/{first.id}").status_code == 200
    assert client.get(f"/cycles/{second.id}").status_code == 200
    assert client.get("/no/such/page").status_code == 404
    names = [span.name for span in server_spans(spans)]
    assert names == ["GET /cycles/<int:cycle_id>", "GET /cycles/<int:cycle_id>", "GET"]
    assert server_spans(spans)[0].attributes["http.route"] == "/cycles/<int:cycle_id>"


def test_user_tenant_and_role_are_on_the_span_after_login_only(
    spans: MemoryTelemetry, instrumented_app: Any
) -> None:
    with seeding(instrumented_app) as session:
        tenant = make_tenant(session)
        admin = make_user(session, tenant, Role.HR_ADMIN)
    client = instrumented_app.test_client()
    client.get("/login")
    [before] = server_spans(spans)
    assert "enduser.id" not in before.attributes
    assert "pauta.tenant.id" not in before.attributes
    login_as(client, admin)
    spans.spans.clear()
    client.get("/cycles/")
    [after] = server_spans(spans)
    assert after.attributes["enduser.id"] == str(admin.id)
    assert tuple(after.attributes["user.roles"]) == ("hr_admin",)
    assert after.attributes["pauta.tenant.id"] == tenant.id


def test_a_failing_job_records_an_error_span_linked_to_the_request_that_enqueued_it(
    spans: MemoryTelemetry, instrumented_app: Any, database_url: str
) -> None:
    with seeding(instrumented_app) as session:
        tenant = make_tenant(session)
        people = make_employees(session, tenant, 3, span=2)
        admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, people)
    client = instrumented_app.test_client()
    login_as(client, admin)
    spans.spans.clear()
    response = post_form(
        client, f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )
    assert response.status_code == 303
    [request_span] = [s for s in server_spans(spans) if s.name.startswith("POST")]
    [producer] = spans.finished("send notifications")
    assert producer.kind == SpanKind.PRODUCER
    assert producer.context.trace_id == request_span.context.trace_id
    assert producer.attributes["messaging.batch.message_count"] == 3

    with psycopg.connect(database_url, autocommit=True) as connection:
        [job] = JobStore(connection).claim("notifications", 1, "w1", 30)
        # No SMTP server listens on the default port: the attempt fails, to be retried.
        result = run_job(job, registry, "w1", lambda: psycopg.connect(database_url))
    assert result.outcome == "failed"
    [consumer] = spans.finished("process hr.notify_reviewer")
    assert consumer.kind == SpanKind.CONSUMER
    assert consumer.status.status_code == StatusCode.ERROR
    assert [event.name for event in consumer.events] == ["exception"]
    assert [link.context.trace_id for link in consumer.links] == [request_span.context.trace_id]
    assert [link.context.span_id for link in consumer.links] == [producer.context.span_id]
    assert consumer.attributes["messaging.destination.name"] == "notifications"
    assert consumer.attributes["messaging.message.id"] == str(job.id)
    assert consumer.attributes["pauta.job.attempt"] == 1
    assert consumer.attributes["pauta.tenant.id"] == tenant.id
    assert result.trace_id == f"{consumer.context.trace_id:032x}"
