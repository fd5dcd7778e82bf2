"""How fast the cycle pages render at size: 500 employees, about 2,000 reviews.

    DATABASE_URL=postgresql://... .venv/bin/python -m bench.cycles_page [--requests 50]

Creates a scratch database on the server named by DATABASE_URL, migrates it, builds one
tenant of 500 employees with an active cycle (every employee takes part; self, manager and two
peer reviews each; a notification per reviewer in a mix of delivery states; a third of the
reviews submitted), then requests the cycle detail page and the cycle list through the Flask
test client as a logged-in HR admin (the whole request: routing, session, queries, templates).
Prints one JSON line per page with p50, p95 and max in milliseconds, and the target. Drops the
database at the end.
"""

import argparse
import json
import os
import re
import secrets
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from typing import Any

import psycopg
from sqlalchemy import text
from sqlalchemy.engine import make_url

TARGET_MS = 300.0
EMPLOYEES = 500
PEERS = 2


@contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    name = f"pauta_bench_{os.getpid()}_{secrets.token_hex(3)}"
    admin_url = make_url(server_url).set(database="postgres").render_as_string(False)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield make_url(server_url).set(database=name).render_as_string(False)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def build(app: Any) -> tuple[int, str, str]:
    """The tenant, its active cycle and its notifications; returns (cycle id, e-mail, password)."""
    from flask_migrate import upgrade

    from hr.accounts import create_user
    from hr.activation import activate_cycle
    from hr.cycles import CycleDetails, change_participants, create_cycle
    from hr.demo import create_demo_employees
    from hr.reviews import generate_reviews
    from models import Tenant, db
    from models.people import Role

    with app.app_context():
        upgrade()
        session = db.session
        tenant = Tenant(slug="bench", name="Bench Corp")
        session.add(tenant)
        session.flush()
        people = create_demo_employees(session, tenant, EMPLOYEES)
        password = secrets.token_urlsafe(16)
        admin = create_user(session, tenant=tenant, email="admin@bench.example", name="Admin",
                            role=Role.HR_ADMIN, password=password)  # fmt: skip
        today = date.today()
        details = CycleDetails("Annual review", today - timedelta(days=365), today,
                               today + timedelta(days=21))  # fmt: skip
        cycle = create_cycle(session, tenant.id, details)
        change_participants(session, tenant.id, cycle.id, {p.id for p in people}, set())
        reviews = generate_reviews(session, tenant.id, cycle.id, PEERS)
        activate_cycle(session, tenant.id, cycle.id, admin.id)
        session.commit()
        # A third submitted; notifications delivered, retrying, dead and still queued.
        session.execute(
            text(
                "UPDATE reviews SET status = 'submitted', rating = 3, comments = 'ok',"
                " submitted_at = now() WHERE mod(id, 3) = 0"
            )
        )
        session.execute(
            text(
                "UPDATE jobs"
                " SET state = CASE WHEN mod(id, 10) = 0 THEN 'dead' ELSE 'succeeded' END,"
                " attempt = 1, finished_at = now(), last_error = CASE WHEN mod(id, 10) = 0"
                " THEN 'PermanentError: SMTP server refused recipient: 550 5.1.1 User unknown' END"
                " WHERE mod(id, 7) <> 0"
            )
        )
        session.execute(
            text(
                "UPDATE jobs SET attempt = 2, available_at = now() + interval '3 minutes',"
                " last_error = 'MailDeferred: 421 try later' WHERE mod(id, 14) = 0"
            )
        )
        session.commit()
        session.execute(text("ANALYZE"))  # as autovacuum would soon after such a load
        session.commit()
        print(f"built: {EMPLOYEES} employees, {reviews} reviews, cycle {cycle.id}",
              file=sys.stderr)  # fmt: skip
        return cycle.id, "admin@bench.example", password


def timed(client: Any, path: str, requests: int) -> list[float]:
    for _ in range(3):  # warm up: templates compiled, pool filled
        assert client.get(path).status_code == 200
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, path
    return samples


def report(metric: str, samples: list[float]) -> None:
    ordered = sorted(samples)
    print(json.dumps({
        "metric": metric,
        "p50": round(statistics.median(ordered), 1),
        "p95": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 1),
        "max": round(ordered[-1], 1),
        "requests": len(ordered),
        "target_ms": TARGET_MS,
        "ok": ordered[max(0, round(0.95 * len(ordered)) - 1)] < TARGET_MS,
    }))  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cycles_page", description=__doc__)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args(argv)
    server = os.environ.get("DATABASE_URL")
    if not server:
        print("set DATABASE_URL to a PostgreSQL server the bench may create a database on",
              file=sys.stderr)  # fmt: skip
        return 2
    from app import create_app
    from models import db

    with scratch_database(server) as url:
        app = create_app({"DATABASE_URL": url, "SECRET_KEY": secrets.token_hex(16)})
        cycle_id, email, password = build(app)
        client = app.test_client()
        login_page = client.get("/login").get_data(as_text=True)
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', login_page)
        assert token is not None
        response = client.post(
            "/login", data={"email": email, "password": password, "csrf_token": token.group(1)}
        )
        assert response.status_code == 302, response.get_data(as_text=True)
        report("cycle_detail_ms", timed(client, f"/cycles/{cycle_id}", args.requests))
        report("cycle_list_ms", timed(client, "/cycles/", args.requests))
        with app.app_context():
            db.engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
