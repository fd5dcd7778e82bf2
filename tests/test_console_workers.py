"""The console against real worker.py processes: its figures are the truth of the tables after a
mixed run, and a graceful shutdown asked in the console stops the worker."""

import re
from typing import Any

import psycopg
import pytest

from jobqueue import JobRequest, JobStore, enqueue_many
from models.people import Role
from tests.support.db import create_test_tables, scalar
from tests.support.factories import csrf_token, login_as, make_user, seeding, system_tenant
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]


@pytest.fixture
def admin(app: Any, conn: Conn) -> Any:
    create_test_tables(conn)
    with seeding(app) as session:
        user = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
    client = app.test_client()
    login_as(client, user)
    return client


def truth(conn: Conn, tenant_id: int | None) -> dict[str, dict[str, Any]]:
    """Per queue, the overview's figures computed from jobs and job_attempts themselves."""
    rows = conn.execute(
        """
        SELECT j.queue,
               count(*) FILTER (WHERE a.outcome = 'succeeded') AS succeeded_60m,
               count(*) FILTER (WHERE a.outcome = 'failed'
                                AND NOT (j.state = 'dead' AND a.attempt = j.attempt)) AS failed_60m,
               count(*) FILTER (WHERE j.state = 'dead' AND a.attempt = j.attempt) AS dead_60m,
               max(extract(epoch FROM a.duration))::float8 AS runtime_max_5m,
               avg(extract(epoch FROM a.duration))::float8 AS runtime_avg_5m
        FROM job_attempts a JOIN jobs j ON j.id = a.job_id
        WHERE %(tenant)s::bigint IS NULL OR j.tenant_id = %(tenant)s
        GROUP BY j.queue
        """,
        {"tenant": tenant_id},
    ).fetchall()
    figures = {row[0]: dict(zip(("succeeded_60m", "failed_60m", "dead_60m", "runtime_max_5m",
               "runtime_avg_5m"), row[1:], strict=True)) for row in rows}  # fmt: skip
    for queue, available, scheduled, running, dead in conn.execute(
        """
        SELECT queue,
               count(*) FILTER (WHERE state = 'available' AND available_at <= now()),
               count(*) FILTER (WHERE state = 'available' AND available_at > now()),
               count(*) FILTER (WHERE state = 'running'),
               count(*) FILTER (WHERE state = 'dead')
        FROM jobs WHERE %(tenant)s::bigint IS NULL OR tenant_id = %(tenant)s GROUP BY queue
        """,
        {"tenant": tenant_id},
    ):
        figures.setdefault(queue, {}).update(
            available=available, scheduled=scheduled, running=running, dead=dead
        )
    return figures


def test_the_overview_figures_equal_the_truth_in_the_tables_after_a_mixed_run(
    admin: Any, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    acme = scalar(conn, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id")
    JobStore(conn).pause_queue("reports", paused_by="test")
    enqueue_many(
        conn,
        [JobRequest("record_run", {"pause": 0.01}) for _ in range(40)]
        + [JobRequest("record_run", tenant_id=acme, queue="mail") for _ in range(15)]
        + [JobRequest("flaky", {"failures": 1}, queue="mail") for _ in range(10)]
        + [JobRequest("always_fails", max_attempts=2, tenant_id=acme) for _ in range(5)]
        + [JobRequest("refuses", tenant_id=acme) for _ in range(3)]
        + [JobRequest("noop", queue="reports", tenant_id=acme) for _ in range(7)]
        + [JobRequest("noop", delay=3600) for _ in range(4)],
    )
    start_worker(workers, database_url, "--queues", "default=3,mail=2,reports=1",
                 "--heartbeat", "0.5")  # fmt: skip
    attempts = "SELECT count(*) FROM job_attempts"
    counted = "SELECT coalesce(sum(succeeded + failed + dead), 0) FROM job_stats_minute"
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state IN ('succeeded',"
               " 'dead')") == 73 and scalar(conn, counted) == scalar(conn, attempts),
               timeout=60, message="the run did not finish and flush")  # fmt: skip

    for tenant, query in ((None, ""), (acme, "?tenant=acme")):
        body = admin.get(f"/metrics/figures.json{query}").get_json()
        expected = truth(conn, tenant)
        shown = {item["queue"]: item["values"] for item in body["queues"]}
        assert set(shown) == {"default", "mail", "reports"}
        for queue, figures in shown.items():
            for name, value in expected.get(queue, {}).items():
                assert figures[name] == pytest.approx(value, abs=0.001), (tenant, queue, name)
            assert figures["live_workers"] == 1
        assert shown["reports"]["paused"] and shown["reports"]["available"] == 7
        assert shown["reports"]["oldest_waiting_seconds"] > 0
        totals = body["totals"]["values"]
        for name in ("available", "scheduled", "dead", "succeeded_60m", "failed_60m"):
            assert totals[name] == sum(item.get(name, 0) for item in expected.values()), name

    whole = truth(conn, None)
    assert (whole["default"]["scheduled"], whole["mail"]["failed_60m"]) == (4, 10)
    page = admin.get("/queues/").get_data(as_text=True)
    row = re.search(r'<tr data-key="mail".*?</tr>', page, re.S)
    assert row is not None
    assert f'data-field="succeeded_60m">{whole["mail"]["succeeded_60m"]}<' in row.group(0)


def test_a_graceful_shutdown_asked_in_the_console_stops_the_worker(
    admin: Any, conn: Conn, database_url: str, workers: list[WorkerProcess]
) -> None:
    supervisor = start_worker(workers, database_url, "--queues", "default=1,mail=1",
                              "--heartbeat", "0.5")  # fmt: skip
    wait_until(lambda: scalar(conn, "SELECT count(*) FROM workers WHERE state = 'running'") == 3)
    token = csrf_token(admin, "/my/reviews")
    response = admin.post("/workers/drain", data={"csrf_token": token, "confirmed": "1"})
    assert response.status_code == 303
    assert supervisor.wait(20) == 0
    states = conn.execute("SELECT DISTINCT state, drain_requested_by FROM workers").fetchall()
    assert len(states) == 1 and states[0][0] == "stopped"
    page = admin.get("/workers/").get_data(as_text=True)
    assert page.count("data-worker-state>stopped<") == 3
