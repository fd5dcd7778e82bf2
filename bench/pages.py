"""What the page benchmarks share: a scratch database, a logged-in test client, timed requests
and the JSON line of a page's figures."""

import json
import os
import re
import secrets
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

TOKEN = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')


@contextmanager
def scratch_database(server_url: str) -> Iterator[str]:
    """A new, empty database on the server of ``server_url``, dropped when the block ends."""
    name = f"pauta_bench_{os.getpid()}_{secrets.token_hex(3)}"
    admin_url = make_url(server_url).set(database="postgres").render_as_string(False)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield make_url(server_url).set(database=name).render_as_string(False)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@contextmanager
def scratch_app() -> Iterator[tuple[Any, str]]:
    """The console app on a scratch database of the server named by DATABASE_URL, and that
    database's URL; the engine's connections are closed when the block ends."""
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit(
            "set DATABASE_URL to a PostgreSQL server the bench may create a database on"
        )
    from app import create_app
    from models import db

    with scratch_database(server) as url:
        app = create_app({"DATABASE_URL": url, "SECRET_KEY": secrets.token_hex(16)})
        try:
            yield app, url
        finally:
            with app.app_context():
                db.engine.dispose()


def logged_in_client(app: Any, email: str, password: str) -> Any:
    """A test client logged in through the log-in form, as a browser would."""
    client = app.test_client()
    token = TOKEN.search(client.get("/login").get_data(as_text=True))
    assert token is not None, "no CSRF token on the log-in page"
    response = client.post(
        "/login", data={"email": email, "password": password, "csrf_token": token.group(1)}
    )
    assert response.status_code == 302, response.get_data(as_text=True)
    return client


def timed(client: Any, path: str, requests: int) -> list[float]:
    """Milliseconds of ``requests`` GETs of ``path``, after three to warm up (templates
    compiled, pool filled)."""
    for _ in range(3):
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, path
    return times


def report(metric: str, times: list[float], target_ms: float, **details: Any) -> bool:
    """Print the page's JSON line (p50, p95, max in ms); True when p95 is under the target."""
    ordered = sorted(times)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    line = {
        "metric": metric,
        **details,
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(p95, 1),
        "max_ms": round(ordered[-1], 1),
        "requests": len(ordered),
        "target_ms": target_ms,
        "ok": p95 < target_ms,
    }
    print(json.dumps(line), flush=True)
    return p95 < target_ms
