"""The health check: public, for load balancers and the set-up smoke test."""

from typing import Any


def test_healthz_answers_ok_without_logging_in(client: Any) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}
