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
import secrets
import sys
from datetime import date, timedelta
from typing import Any

from sqlalchemy import text

from bench.pages import logged_in_client, report, scratch_app, timed

TARGET_MS = 300.0
EMPLOYEES = 500
PEERS = 2


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


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cycles_page", description=__doc__)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args(argv)
    with scratch_app() as (app, _url):
        cycle_id, email, password = build(app)
        client = logged_in_client(app, email, password)
        verdicts = [
            report("cycle_detail_ms", timed(client, path := f"/cycles/{cycle_id}", args.requests),
                   TARGET_MS, path=path),
            report("cycle_list_ms", timed(client, "/cycles/", args.requests), TARGET_MS,
                   path="/cycles/"),
        ]  # fmt: skip
    return 0 if all(verdicts) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
