"""`flask employees import`: the page's import from a shell, applied by a real worker."""

import json
from pathlib import Path
from typing import Any

import psycopg

from tests.support.db import scalar
from tests.support.processes import WorkerProcess, start_worker

Conn = psycopg.Connection[Any]


def employee_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "people.csv"
    path.write_text("name,email,department,manager_email\n" + body)
    return str(path)


def test_import_waits_for_the_worker_and_prints_the_report(
    cli: Any, conn: Conn, database_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    conn.execute("INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme')")
    start_worker(workers, database_url, "--queues", "default=1", "--poll", "0.1",
                 tasks="hr.tasks")  # fmt: skip
    path = employee_file(
        tmp_path,
        "Ana,ana@acme.example,Leadership,\n"
        "Bo,bo@acme.example,Sales,ana@acme.example\n"
        "Cy,cy@acme.example,Sales,nobody@acme.example\n",
    )
    result = cli.invoke(args=["employees", "import", path, "--tenant", "acme", "--wait"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    import_id = scalar(conn, "SELECT id FROM employee_imports")
    assert lines[0].startswith(f"import {import_id} of people.csv (3 rows) queued as job ")
    assert lines[-2:] == [
        "2 created, 0 updated, 0 unchanged, 1 refused",
        "line 4: cy@acme.example: the manager nobody@acme.example is neither an employee nor in"
        " the file",
    ]
    assert "finished: 3 of 3 rows" in lines
    assert scalar(conn, "SELECT m.email FROM employees e JOIN employees m ON m.id = e.manager_id"
                        " WHERE e.email = 'bo@acme.example'") == "ana@acme.example"  # fmt: skip
    assert scalar(conn, "SELECT created_by IS NULL FROM employee_imports") is True


def test_import_refuses_an_unknown_tenant_and_a_file_it_cannot_read(
    cli: Any, conn: Conn, tmp_path: Path
) -> None:
    path = employee_file(tmp_path, "Ana,ana@acme.example,Sales,\n")
    unknown = cli.invoke(args=["employees", "import", path, "--tenant", "nope"])
    assert (unknown.exit_code, unknown.output) == (1, "Error: unknown tenant 'nope'\n")
    conn.execute("INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme')")
    (tmp_path / "people.csv").write_bytes(b"Name,E-mail\nAna,ana@acme.example\n")
    refused = cli.invoke(args=["employees", "import", path, "--tenant", "acme"])
    assert refused.exit_code == 1
    assert refused.output == (
        "Error: people.csv cannot be imported: the first line must name the columns name, email,"
        " department, manager_email (in any order); it names name, e-mail.\n"
    )
    assert scalar(conn, "SELECT count(*) FROM employee_imports") == 0


def test_export_waits_for_the_worker_and_writes_the_json_and_the_page(
    cli: Any, conn: Conn, database_url: str, workers: list[WorkerProcess], tmp_path: Path
) -> None:
    conn.execute("INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme')")
    conn.execute(
        "INSERT INTO employees (tenant_id, name, email, department)"
        " SELECT id, 'Ana Lima', 'ana@acme.example', 'Ops' FROM tenants WHERE slug = 'acme'"
    )
    start_worker(workers, database_url, "--queues", "default=1", "--poll", "0.1",
                 tasks="hr.tasks")  # fmt: skip
    out = tmp_path / "request"
    args = ["employees", "export", "ANA@acme.example", "--tenant", "acme", "--out", str(out)]

    result = cli.invoke(args=args)

    assert result.exit_code == 0, result.output
    export_id, employee_id, requested_by, days = conn.execute(
        "SELECT id, employee_id, requested_by, (expires_at - created_at) FROM data_exports"
    ).fetchone()  # type: ignore[misc]
    assert requested_by is None and days.days == 7
    written = out / f"personal-data-{employee_id}-{export_id}.json"
    assert json.loads(written.read_text())["profile"]["name"] == "Ana Lima"
    assert "Ana Lima" in written.with_suffix(".html").read_text()
    unknown = cli.invoke(args=["employees", "export", "zed@acme.example", "--tenant", "acme"])
    assert unknown.exit_code == 1 and "no employee of acme" in unknown.output
