"""Telemetry end to end: gunicorn and worker.py as real processes exporting over OTLP/HTTP to a
real receiver on loopback. A request that enqueues jobs yields a server span, and the worker a
consumer span linked to it; metrics arrive with their names and labels."""

import bisect
import http.cookiejar
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from devtools.otlp_receiver import ReceivedHistogram, Receiver
from jobqueue.telemetry import DURATION_BUCKETS
from models.people import Role
from tests.support.factories import (
    PASSWORD,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
)
from tests.support.processes import WorkerProcess, start_worker, wait_until
from tests.support.smtp import SmtpServer, free_port

ROOT = Path(__file__).resolve().parent.parent
CONSUMER, SERVER = 5, 2  # OTLP span kinds
TOKEN = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver().start()
    yield receiver
    receiver.stop()


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer().start()
    yield server
    server.stop()


def otel_environment(receiver: Receiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


@pytest.fixture
def console(database_url: str, receiver: Receiver) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "wsgi:app",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--no-control-socket",
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "DATABASE_URL": database_url,
            "SECRET_KEY": "e2e",
            **otel_environment(receiver),
        },
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(f"{base}/healthz"), timeout=30)
        yield base
    finally:
        process.terminate()
        process.wait(30)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


class Browser:
    """Just enough of a browser: cookies, and forms posted with the page's CSRF token."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

    def get(self, path: str) -> str:
        with self.opener.open(self.base + path, timeout=10) as response:
            return str(response.read().decode())

    def post(self, path: str, data: dict[str, str], token_from: str) -> int:
        token = TOKEN.search(self.get(token_from))
        assert token, f"no CSRF token on {token_from}"
        body = urllib.parse.urlencode({**data, "csrf_token": token.group(1)}).encode()
        with self.opener.open(self.base + path, data=body, timeout=10) as response:
            return int(response.status)


def test_a_request_and_the_jobs_it_enqueued_are_one_click_apart(
    app: Any,
    console: str,
    receiver: Receiver,
    smtp: SmtpServer,
    database_url: str,
    workers: list[WorkerProcess],
) -> None:
    """kills: job-times-bucket-by-bisect-right, job-times-not-in-reader"""
    with seeding(app) as session:
        tenant = make_tenant(session)
        people = make_employees(session, tenant, 4, span=3)
        admin = make_user(session, tenant, Role.HR_ADMIN)
        cycle = make_cycle(session, tenant, people)
    start_worker(
        workers,
        database_url,
        "--queues",
        "notifications=2",
        tasks="hr.tasks,tests.support.tasks",
        env={**otel_environment(receiver), **smtp.env},
    )
    browser = Browser(console)
    assert browser.post("/login", {"email": admin.email, "password": PASSWORD}, "/login") == 200
    activated = browser.post(
        f"/cycles/{cycle.id}/activate", {"confirmed": "1"}, token_from=f"/cycles/{cycle.id}"
    )
    assert activated == 200  # after the redirect to the cycle page
    smtp.wait_for(4)

    def request_span() -> Any:
        found = receiver.spans_named("POST /cycles/<int:cycle_id>/activate")
        return found[0] if found else None

    server = wait_until(request_span, timeout=20)
    assert (server.service, server.kind) == ("pauta-web", SERVER)
    assert server.attributes["http.route"] == "/cycles/<int:cycle_id>/activate"
    assert server.attributes["enduser.id"] == str(admin.id)
    consumers = wait_until(
        lambda: (
            len(receiver.spans_named("process hr.notify_reviewer")) >= 4
            and receiver.spans_named("process hr.notify_reviewer")
        ),
        timeout=20,
    )
    for span in consumers:
        assert (span.service, span.kind) == ("pauta-worker", CONSUMER)
        assert [trace_id for trace_id, _ in span.links] == [server.trace_id]
        assert span.attributes["messaging.destination.name"] == "notifications"
        assert span.attributes["pauta.tenant.id"] == tenant.id
    [producer] = receiver.spans_named("send notifications")
    assert producer.trace_id == server.trace_id
    assert {span_id for span in consumers for _, span_id in span.links} == {producer.span_id}

    processed = wait_until(
        lambda: [
            labels
            for labels in receiver.metric_attributes("pauta.jobs.processed")
            if labels.get("outcome") == "succeeded"
        ],
        timeout=20,
    )
    assert processed[0] == {
        "queue": "notifications",
        "task": "hr.notify_reviewer",
        "outcome": "succeeded",
    }
    run_time = wait_until(lambda: receiver.metric_attributes("pauta.job.run.duration"), timeout=10)
    assert run_time[0] == {"queue": "notifications", "task": "hr.notify_reviewer"}
    assert wait_until(lambda: receiver.metric_attributes("pauta.job.wait.duration"), timeout=10)
    _assert_run_times_bucketed_as_their_attempt_rows(receiver, database_url)
    depth = wait_until(lambda: receiver.metric_attributes("pauta.queue.depth"), timeout=20)
    assert {labels["state"] for labels in depth} == {"available", "scheduled", "running", "dead"}
    assert wait_until(lambda: receiver.metric_attributes("pauta.queue.oldest_waiting_age"))

    def http_duration_of_activate() -> list[dict[str, Any]]:
        """Every request's duration labels, once the activation's have been exported (an export
        may come before that request's datapoint is in it)."""
        found = receiver.metric_attributes("http.server.request.duration")
        activate = "/cycles/<int:cycle_id>/activate"
        return found if any(labels.get("http.route") == activate for labels in found) else []

    http_duration = wait_until(http_duration_of_activate, timeout=20)
    assert not any("enduser.id" in labels for labels in http_duration)


def _assert_run_times_bucketed_as_their_attempt_rows(receiver: Receiver, database_url: str) -> None:
    """The run-time histogram has bounds made for seconds (the SDK's defaults, 0, 5, 10 ...,
    would put every notification in one bucket), and each attempt in the bucket its duration in
    job_attempts belongs to."""
    labels = {"queue": "notifications", "task": "hr.notify_reviewer"}
    with psycopg.connect(database_url) as conn:

        def every_attempt_counted() -> tuple[ReceivedHistogram, list[float]] | None:
            durations = [
                float(row[0])
                for row in conn.execute(
                    "SELECT extract(epoch FROM a.duration)::float8 FROM job_attempts AS a"
                    " JOIN jobs ON jobs.id = a.job_id WHERE jobs.task = 'hr.notify_reviewer'"
                )
            ]
            conn.rollback()
            points = [
                point
                for point in receiver.histogram_points("pauta.job.run.duration")
                if point.attributes == labels and sum(point.counts) == len(durations)
            ]
            return (points[-1], durations) if points and len(durations) >= 4 else None

        point, durations = wait_until(every_attempt_counted, timeout=20)
    assert point.bounds == DURATION_BUCKETS
    expected = [0] * (len(DURATION_BUCKETS) + 1)
    for duration in durations:  # a bucket holds (bound before, its bound]
        expected[bisect.bisect_left(DURATION_BUCKETS, duration)] += 1
    assert point.counts == tuple(expected)
