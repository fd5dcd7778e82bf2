"""`flask users create` and `flask seed-demo`."""

from typing import Any

import psycopg
from argon2 import PasswordHasher

from tests.support.db import scalar

Conn = psycopg.Connection[Any]


def test_create_reads_the_password_from_stdin_and_can_create_the_tenant(
    cli: Any, conn: Conn
) -> None:
    result = cli.invoke(
        args=["users", "create", "--tenant", "acme", "--tenant-name", "Acme", "--role",
              "hr_admin", "--email", "Ana@Acme.example", "--name", "Ana"],
        input="a long enough password\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.output.startswith("created user ")
    email, role, stored = conn.execute(
        "SELECT email, role, password_hash FROM users u JOIN tenants t ON t.id = u.tenant_id"
        " WHERE t.slug = 'acme'"
    ).fetchone()  # type: ignore[misc]
    assert (email, role) == ("ana@acme.example", "hr_admin")
    assert PasswordHasher().verify(stored, "a long enough password")


def test_create_links_an_employee_of_the_tenant(cli: Any, conn: Conn) -> None:
    tenant = scalar(conn, "INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme') RETURNING id")
    employee = scalar(
        conn,
        "INSERT INTO employees (tenant_id, name, email, department)"
        " VALUES (%s, 'Bo', 'bo@acme.example', 'Sales') RETURNING id",
        tenant,
    )
    result = cli.invoke(
        args=["users", "create", "--tenant", "acme", "--role", "employee", "--email",
              "bo@acme.example", "--employee-email", "BO@acme.example"],
        input="another long password\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert scalar(conn, "SELECT employee_id FROM users") == employee


def test_bad_input_is_refused_with_one_sentence_and_nothing_written(cli: Any, conn: Conn) -> None:
    cases = [
        (["--tenant", "ghost"], "long enough password", "unknown tenant 'ghost'"),
        (["--tenant", "system"], "short", "the password needs at least 12 characters"),
        (["--tenant", "system", "--employee-email", "x@y.example"], "long enough password",
         "tenant system has no employee x@y.example"),
    ]  # fmt: skip
    for options, password, message in cases:
        result = cli.invoke(
            args=["users", "create", "--role", "hr_staff", "--email", "x@y.example", *options],
            input=password + "\n",
        )
        assert (result.exit_code, message in result.output) == (1, True), result.output
    assert scalar(conn, "SELECT count(*) FROM users") == 0
    cli.invoke(args=["users", "create", "--tenant", "system", "--role", "hr_staff", "--email",
                     "x@y.example"], input="long enough password\n")  # fmt: skip
    taken = cli.invoke(args=["users", "create", "--tenant", "system", "--role", "hr_staff",
                             "--email", "X@y.example"], input="long enough password\n")  # fmt: skip
    assert "a user with the e-mail x@y.example already exists" in taken.output


def test_seed_demo_builds_the_demo_tenant_once_and_prints_credentials(cli: Any, conn: Conn) -> None:
    result = cli.invoke(args=["seed-demo"])
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.output.splitlines() if line.startswith("  ")]
    assert [line[0] for line in lines] == ["hr_admin", "hr_staff", "employee", "platform_admin"]
    assert scalar(conn, "SELECT count(*) FROM employees") == 40
    assert scalar(conn, "SELECT count(*) FROM employees WHERE manager_id IS NULL") == 1
    assert scalar(conn, "SELECT status FROM review_cycles") == "draft"
    assert scalar(conn, "SELECT count(*) FROM cycle_participants") == 40
    assert scalar(conn, "SELECT count(DISTINCT kind) FROM reviews") == 3
    for role, email, password in lines:
        stored = scalar(conn, "SELECT password_hash FROM users WHERE email = %s", email)
        assert PasswordHasher().verify(stored, password), role
    again = cli.invoke(args=["seed-demo"])
    assert "exists already; nothing to do" in again.output
    assert scalar(conn, "SELECT count(*) FROM employees") == 40
