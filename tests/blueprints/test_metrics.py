"""The JSON behind the console's live refresh and graphs."""

from typing import Any

import psycopg
import pytest

from models.people import Role
from tests.support.factories import login_as, make_tenant, make_user, seeding, system_tenant
from tests.support.jobs import make_job, register_worker

Conn = psycopg.Connection[Any]


@pytest.fixture
def tenants(app: Any) -> dict[str, Any]:
    with seeding(app) as session:
        acme, globex = make_tenant(session, "acme"), make_tenant(session, "globex")
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
        return {"acme": acme.id, "globex": globex.id, "admin": admin}


@pytest.fixture
def admin(app: Any, tenants: dict[str, Any]) -> Any:
    client = app.test_client()
    login_as(client, tenants["admin"])
    return client


def add_stats(conn: Conn, queue: str, minutes_ago: int, tenant: int, **counts: float) -> None:
    columns = ("succeeded", "failed", "dead", "runtime_sum", "runtime_max", "wait_sum", "wait_max")
    conn.execute(
        f"INSERT INTO job_stats_minute (queue, minute, tenant_id, {', '.join(columns)})"
        " VALUES (%s, date_trunc('minute', now()) - make_interval(mins => %s), %s"
        + ", %s" * len(columns)
        + ")",
        (queue, minutes_ago, tenant, *(counts.get(column, 0) for column in columns)),
    )


def test_figures_count_live_jobs_and_the_last_minutes_outcomes(
    admin: Any, conn: Conn, tenants: dict[str, Any]
) -> None:
    acme, globex = tenants["acme"], tenants["globex"]
    for _ in range(2):
        make_job(conn, queue="mail", tenant_id=acme)
    make_job(conn, queue="mail", tenant_id=globex, state="running")
    make_job(conn, queue="mail", tenant_id=globex, state="dead", error="E: x")
    make_job(conn, queue="mail", tenant_id=acme, state="succeeded")  # not counted live
    register_worker(conn, queue="mail")
    add_stats(conn, "mail", 0, acme, succeeded=8, failed=1, dead=1, runtime_sum=5.0,
              runtime_max=2.5, wait_sum=1.0, wait_max=0.4)  # fmt: skip
    add_stats(conn, "mail", 3, globex, succeeded=10, runtime_sum=1.0, runtime_max=0.3)
    add_stats(conn, "mail", 30, acme, succeeded=100, runtime_max=99.0)
    add_stats(conn, "mail", 90, acme, succeeded=1000)  # older than the longest window

    body = admin.get("/metrics/figures.json").get_json()
    (mail,) = body["queues"]
    values = mail["values"]
    assert mail["queue"] == "mail" and mail["url"] == "/queues/mail"
    assert (values["available"], values["running"], values["dead"]) == (2, 1, 1)
    assert values["live_workers"] == 1 and body["totals"]["values"]["live_workers"] == 1
    assert (values["succeeded_1m"], values["succeeded_5m"], values["succeeded_60m"]) == (8, 18, 118)
    assert (values["failed_5m"], values["dead_5m"]) == (1, 1)
    # 120 attempts over 60 minutes and the part of this one gone by, rounded to 3 decimals
    assert round(120 / 61, 3) <= values["rate_60m"] <= round(120 / 60, 3)
    assert values["error_rate_5m"] == pytest.approx(2 / 20)
    assert values["runtime_avg_5m"] == pytest.approx(6.0 / 20)
    assert (values["runtime_max_5m"], values["wait_max_5m"]) == (2.5, 0.4)
    assert mail["display"]["runtime_avg"] == "300 ms" and mail["display"]["error_rate"] == "10.0 %"
    assert body["totals"]["values"] == values | {"paused": False}

    narrowed = admin.get("/metrics/figures.json?tenant=globex").get_json()
    values = narrowed["queues"][0]["values"]
    assert (
        narrowed["tenant"] == "globex"
        and narrowed["queues"][0]["url"] == "/queues/mail?tenant=globex"
    )
    assert (values["available"], values["running"], values["dead"]) == (0, 1, 1)
    assert (values["succeeded_5m"], values["succeeded_60m"], values["error_rate_5m"]) == (
        10,
        10,
        0.0,
    )
    assert admin.get("/metrics/figures.json?queue=nothing").status_code == 404


def test_series_bucket_the_window_and_give_throughput_per_minute(
    admin: Any, conn: Conn, tenants: dict[str, Any]
) -> None:
    make_job(conn, queue="mail")
    add_stats(conn, "mail", 2, tenants["acme"], succeeded=30, failed=6, dead=3, runtime_sum=7.8,
              runtime_max=1.5)  # fmt: skip
    conn.execute(
        "INSERT INTO queue_depth_minute (queue, minute, tenant_id, available, scheduled, running,"
        " dead) SELECT 'mail', date_trunc('minute', now()) - interval '2 minutes', tenant, a, s,"
        " r, d FROM (VALUES (%s, 4, 1, 2, 3), (%s, 6, 0, 0, 0)) AS sample (tenant, a, s, r, d)",
        (tenants["acme"], tenants["globex"]),
    )
    hour = admin.get("/metrics/series.json?queue=mail&window=1h").get_json()
    assert hour["bucket_seconds"] == 60 and len(hour["labels"]) in (61, 62)
    assert all(len(values) == len(hour["labels"]) for values in hour["throughput"].values())
    at = hour["throughput"]["succeeded"].index(30)
    assert (hour["throughput"]["failed"][at], hour["throughput"]["dead"][at]) == (6, 3)
    assert hour["timing"]["runtime_avg"][at] == pytest.approx(0.2)
    assert hour["timing"]["runtime_max"][at] == 1.5
    assert hour["depth"]["available"][at] == 10 and hour["depth"]["dead"][at] == 3
    assert hour["depth"]["available"].count(None) == len(hour["labels"]) - 1
    assert sum(hour["throughput"]["succeeded"]) == 30

    day = admin.get("/metrics/series.json?queue=mail&window=24h&tenant=acme").get_json()
    assert day["bucket_seconds"] == 900 and 96 <= len(day["labels"]) <= 98
    assert sum(day["throughput"]["succeeded"]) == pytest.approx(30 / 15)
    assert max(value or 0 for value in day["depth"]["available"]) == 4
    week = admin.get("/metrics/series.json?window=7d").get_json()
    assert week["bucket_seconds"] == 7200 and 84 <= len(week["labels"]) <= 86
    assert admin.get("/metrics/series.json?window=1y").status_code == 404
    assert admin.get("/metrics/series.json?queue=nothing").status_code == 404


def test_one_queues_totals_count_only_the_workers_serving_it(admin: Any, conn: Conn) -> None:
    make_job(conn, queue="mail")
    make_job(conn, queue="reports")
    supervisor = register_worker(conn, queue=None, pid=10)
    register_worker(conn, queue="mail", parent_id=supervisor, pid=11)
    register_worker(conn, queue="default", parent_id=supervisor, pid=12)
    mail = admin.get("/metrics/figures.json?queue=mail").get_json()
    assert mail["totals"]["values"]["live_workers"] == mail["queues"][0]["values"]["live_workers"]
    assert mail["totals"]["display"]["live_workers"] == "1"
    everything = admin.get("/metrics/figures.json").get_json()
    assert everything["totals"]["values"]["live_workers"] == 2  # queue processes, all queues


def test_a_queue_with_work_and_no_live_worker_is_flagged(admin: Any, conn: Conn) -> None:
    make_job(conn, queue="mail")
    make_job(conn, queue="reports", delay=3600)
    make_job(conn, queue="archive", state="succeeded")  # no work left: nothing to flag
    register_worker(conn, queue="mail")
    body = admin.get("/metrics/figures.json").get_json()
    state = {item["queue"]: item["display"]["state"] for item in body["queues"]}
    assert state == {"archive": "", "mail": "", "reports": "no live worker"}
    assert {item["queue"]: item["values"]["unserved"] for item in body["queues"]} == {
        "archive": False, "mail": False, "reports": True,
    }  # fmt: skip
    assert body["totals"]["display"]["unserved_queues"] == "reports"
    conn.execute("UPDATE queues SET paused = true WHERE name = 'mail'")
    paused = admin.get("/metrics/figures.json?queue=mail").get_json()["queues"][0]
    assert paused["display"]["state"] == "paused"
