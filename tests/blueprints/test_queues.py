"""The placeholder console page and the health check."""

from typing import Any

import psycopg

from jobqueue import enqueue


def test_healthz_answers_ok(client: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_overview_lists_queues_with_their_counts(
    client: Any, conn: psycopg.Connection[Any]
) -> None:
    assert "No queue has seen a job yet" in client.get("/queues/").get_data(as_text=True)
    enqueue(conn, "noop", queue="mail")
    enqueue(conn, "noop", queue="mail", delay=60)
    page = client.get("/queues/").get_data(as_text=True)
    assert "<td>mail</td>" in page
    assert '<td class="num">1</td>' in page
    assert client.get("/").headers["Location"].endswith("/queues/")
