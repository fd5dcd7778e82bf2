"""`flask jobs ...`: what it prints, and bad arguments refused before anything is written."""

import json
from typing import Any

import psycopg
import pytest

from jobqueue import JobStore, enqueue
from tests.support.db import job_row, scalar

Conn = psycopg.Connection[Any]


def test_enqueue_prints_the_new_ids(cli: Any, conn: Conn) -> None:
    result = cli.invoke(
        args=["jobs", "enqueue", "sleep", "--payload", '{"seconds": 1}', "--count", "3"]
    )
    assert result.exit_code == 0, result.output
    ids = [int(line) for line in result.output.split()]
    assert len(ids) == 3
    assert job_row(conn, ids[0])["payload"] == {"seconds": 1}


def test_enqueue_with_every_option(cli: Any, conn: Conn) -> None:
    conn.execute("INSERT INTO tenants (slug, name) VALUES ('acme', 'Acme')")
    result = cli.invoke(
        args=[
            "jobs", "enqueue", "noop", "--queue", "reports", "--delay", "60", "--priority", "-1",
            "--max-attempts", "2", "--tenant", "acme",
        ]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    row = job_row(conn, int(result.output))
    assert (row["queue"], row["priority"], row["max_attempts"]) == ("reports", -1, 2)
    assert row["tenant_id"] == scalar(conn, "SELECT id FROM tenants WHERE slug = 'acme'")
    assert row["available_at"] > row["created_at"]


def test_enqueue_many_prints_a_count(cli: Any, conn: Conn) -> None:
    result = cli.invoke(args=["jobs", "enqueue", "noop", "--count", "500"])
    assert result.exit_code == 0
    assert result.output.startswith("enqueued 500 jobs")
    assert scalar(conn, "SELECT count(*) FROM jobs") == 500


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such"], "Error: unknown task 'no_such'; registered tasks are: "),
        (["noop", "--payload", "{nope"], "Error: --payload is not valid JSON: "),
        (["noop", "--payload", "[1, 2]"], "Error: --payload must be a JSON object"),
        (["noop", "--delay", "-5"], "Error: --delay must be between 0 and 315,360,000 seconds"),
        (["noop", "--delay", "inf"], "Error: --delay must be between 0 and 315,360,000 seconds"),
        (["noop", "--delay", "nan"], "Error: --delay must be between 0 and 315,360,000 seconds"),
        (["noop", "--delay", "1e20"], "Error: --delay must be between 0 and 315,360,000 seconds"),
        (["noop", "--at", "tomorrow"], "Error: --at 'tomorrow' is not an ISO 8601 time"),
        (["noop", "--at", "2030-01-01T09:00"], "Error: --at '2030-01-01T09:00' needs a UTC offset"),
        (["noop", "--at", "9999-12-31T23:59:59-14:00"], "Error: --at must be between 1970-01-01"),
        (["noop", "--at", "0001-01-01T00:00:00+14:00"], "Error: --at must be between 1970-01-01"),
        (["noop", "--tenant", "ghost"], "Error: unknown tenant 'ghost'"),
        (["noop", "--tenant", "a\x00b"], "Error: --tenant must be a tenant's slug"),
        (["noop", "--queue", "Not OK"], "Error: queue name 'Not OK' is invalid"),
        (["noop", "--count", "0"], "Error: --count must be between 1 and 100,000, not 0"),
        (["noop", "--count", "99999999999"], "Error: --count must be between 1 and 100,000"),
        (["noop", "--max-attempts", "0"], "Error: --max-attempts must be between 1 and 1,000,000"),
        (["noop", "--max-attempts", "99999999999"], "Error: --max-attempts must be between 1"),
        (["noop", "--priority", "99999999999"], "Error: --priority must be a whole number"),
        (["noop", "--payload", '{"a": "\\u0000"}'], "Error: --payload of task 'noop' holds a NUL"),
        (["noop", "--payload", '{"a": "\\ud800"}'], "Error: --payload of task 'noop' holds a NUL"),
        (["noop", "--delay", "1", "--at", "2030-01-01T09:00+00:00"], "Error: give --delay or --at"),
    ],
)
def test_bad_arguments_exit_non_zero_with_one_sentence_and_write_nothing(
    cli: Any, conn: Conn, args: list[str], message: str
) -> None:
    result = cli.invoke(args=["jobs", "enqueue", *args])
    assert result.exit_code != 0
    assert result.output.startswith(message), result.output
    assert result.output.count("\n") == 1
    assert scalar(conn, "SELECT count(*) FROM jobs") == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["requeue", "99999999999999999999"], "is not in the range 1<=x<=9223372036854775807"),
        (["requeue", "0"], "is not in the range 1<=x<=9223372036854775807"),
        (["resume", "bad\x00queue"], "Error: queue name 'bad\\x00queue' is invalid"),
        (["pause", "Bad Queue"], "Error: queue name 'Bad Queue' is invalid"),
    ],
)
def test_bad_operation_arguments_exit_non_zero_with_one_sentence(
    cli: Any, conn: Conn, args: list[str], message: str
) -> None:
    result = cli.invoke(args=["jobs", *args])
    assert result.exit_code != 0
    assert message in result.output, result.output
    assert "Traceback" not in result.output
    assert scalar(conn, "SELECT count(*) FROM queues WHERE paused") == 0


def test_stats_as_table_and_json(cli: Any, conn: Conn) -> None:
    enqueue(conn, "noop")
    enqueue(conn, "noop", delay=600)
    JobStore(conn).pause_queue("default", "test")
    table = cli.invoke(args=["jobs", "stats"])
    assert table.exit_code == 0
    assert "default" in table.output and "(paused)" in table.output
    data = json.loads(cli.invoke(args=["jobs", "stats", "--json"]).output)
    assert data == {"queues": {"default": {"available": 1, "scheduled": 1}}, "paused": ["default"]}


def test_requeue_pause_and_resume(cli: Any, conn: Conn) -> None:
    job_id = enqueue(conn, "noop")
    refused = cli.invoke(args=["jobs", "requeue", str(job_id)])
    assert refused.exit_code == 1
    assert "only dead or cancelled jobs can be requeued" in refused.output
    conn.execute(
        "UPDATE jobs SET state = 'dead', attempt = 5, finished_at = now() WHERE id = %s", (job_id,)
    )
    assert cli.invoke(args=["jobs", "requeue", str(job_id)]).output == f"job {job_id} requeued\n"
    assert (job_row(conn, job_id)["state"], job_row(conn, job_id)["max_attempts"]) == (
        "available",
        10,
    )
    assert (
        cli.invoke(args=["jobs", "requeue", "999999"]).output == "Error: there is no job 999999\n"
    )
    assert cli.invoke(args=["jobs", "pause", "default"]).exit_code == 0
    assert scalar(conn, "SELECT paused FROM queues WHERE name = 'default'") is True
    assert cli.invoke(args=["jobs", "resume", "default"]).exit_code == 0
    assert scalar(conn, "SELECT paused FROM queues WHERE name = 'default'") is False
    assert cli.invoke(args=["jobs", "resume", "nowhere"]).exit_code == 1
    bad = cli.invoke(args=["jobs", "pause", "No Such Queue"])
    assert (
        bad.exit_code,
        bad.output.startswith("Error: queue name 'No Such Queue' is invalid"),
    ) == (
        1,
        True,
    )


def test_stats_lists_a_paused_queue_without_jobs(cli: Any) -> None:
    cli.invoke(args=["jobs", "pause", "quiet"])
    data = json.loads(cli.invoke(args=["jobs", "stats", "--json"]).output)
    assert data == {"queues": {"quiet": {}}, "paused": ["quiet"]}


def test_requeue_refused_by_a_held_unique_key_says_why(cli: Any, conn: Conn) -> None:
    dead = enqueue(conn, "noop", unique_key="k")
    conn.execute("UPDATE jobs SET state = 'dead', finished_at = now() WHERE id = %s", (dead,))
    enqueue(conn, "noop", unique_key="k")
    result = cli.invoke(args=["jobs", "requeue", str(dead)])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: job {dead} cannot be requeued: a waiting or running job holds its unique key\n"
    )
