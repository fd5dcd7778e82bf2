"""A small organisation with one user of every role and a row behind every kind of URL
argument: what the tests that walk every route need to reach past "not found"."""

from dataclasses import dataclass
from typing import Any

import psycopg

from hr.exports import start_export
from models.people import Role
from tests.support.db import scalar
from tests.support.factories import (
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)
from tests.support.jobs import make_job, register_worker


@dataclass
class World:
    users: dict[Role, Any]  # one per role; the platform admin in the system tenant
    tenant_id: int
    draft_id: int  # a draft cycle with participants and generated reviews
    active_id: int  # an active cycle: open reviews and notification jobs
    arguments: dict[str, list[Any]]  # values that name rows, for each URL argument name


def build_world(app: Any, conn: psycopg.Connection[Any]) -> World:
    with seeding(app) as session:
        tenant = make_tenant(session, "ours")
        people = make_employees(session, tenant, 8)
        users: dict[Role, Any] = {
            role: make_user(session, tenant, role, employee=people[index])
            for index, role in ((3, Role.EMPLOYEE), (1, Role.HR_STAFF), (0, Role.HR_ADMIN))
        }
        users[Role.PLATFORM_ADMIN] = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
        active = make_cycle(session, tenant, people, activate_as=users[Role.HR_ADMIN])
        draft = make_cycle(session, tenant, people[:5])
        export = start_export(session, people[5], users[Role.HR_ADMIN])
        tenant_id = tenant.id
    dead = make_job(conn, "noop", state="dead", tenant_id=tenant_id, error="ValueError: bad 1")
    scheduled = make_job(conn, "noop", tenant_id=tenant_id, delay=3600)
    fingerprint = scalar(
        conn, "SELECT md5(task || E'\\n' || job_error_pattern(last_error)) FROM jobs WHERE id = %s",
        dead,
    )  # fmt: skip
    review = scalar(
        conn,
        "SELECT min(id) FROM reviews WHERE cycle_id = %s AND reviewer_id = %s",
        active.id,
        users[Role.EMPLOYEE].employee_id,
    )
    notice = scalar(
        conn, "SELECT min(id) FROM jobs WHERE payload->>'cycle_id' = %s", str(active.id)
    )
    execution = scalar(
        conn,
        "WITH e AS (INSERT INTO workflow_executions (tenant_id, name, status) VALUES (%s,"
        " 'approval', 'waiting') RETURNING id) INSERT INTO workflow_waits (execution_id, step_id,"
        " kind, key) SELECT id, 1, 'event', 'approval' FROM e RETURNING execution_id",
        tenant_id,
    )  # a workflow execution waiting on an approval
    arguments = {
        "execution_id": [execution],
        "cycle_id": [draft.id, active.id],
        "employee_id": [users[Role.EMPLOYEE].employee_id],
        "export_id": [export.id],
        "review_id": [review],
        "job_id": [dead, scheduled, notice],
        "name": ["default", "notifications"],
        "fingerprint": [fingerprint],
        "worker_id": [register_worker(conn)],
        "filename": ["pauta.css"],
    }
    return World(users, tenant_id, draft.id, active.id, arguments)
