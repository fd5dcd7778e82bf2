"""Fixtures: a real PostgreSQL database per test, copied from a template migrated once per run."""

import itertools
import os
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from devtools.catalogues import compile_stale
from tests.support import pgbouncer as pooler
from tests.support.english import in_english
from tests.support.processes import WorkerProcess

SERVER_URL = os.environ.get("DATABASE_URL", "")
RUN_ID = f"pauta_test_{os.getpid()}_{secrets.token_hex(3)}"
_copies = itertools.count(1)


def url_for_database(name: str) -> str:
    return make_url(SERVER_URL).set(database=name).render_as_string(hide_password=False)


def _admin() -> psycopg.Connection[Any]:
    return psycopg.connect(url_for_database("postgres"), autocommit=True)


@pytest.fixture(scope="session", autouse=True)
def compiled_catalogues() -> None:
    """The .mo files `make test` compiles, compiled here too for a run started from pytest."""
    compile_stale()


@pytest.fixture(scope="session")
def template_database() -> Iterator[str]:
    if not SERVER_URL:
        pytest.exit("DATABASE_URL is not set: run `make test`, which finds a PostgreSQL server")
    from flask_migrate import upgrade

    from app import create_app
    from models import db

    name = f"{RUN_ID}_template"
    with _admin() as admin:
        admin.execute(f"CREATE DATABASE {name}")
    app = create_app({"DATABASE_URL": url_for_database(name), "SECRET_KEY": "test"})
    with app.app_context():
        upgrade()
        db.engine.dispose()
    yield name
    with _admin() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``pooled`` run twice: straight to the server, and through PgBouncer; but
    those marked ``not_pooled`` (they watch one server backend, by its pid) run once, direct."""
    marked = metafunc.definition.get_closest_marker
    if "database_url" in metafunc.fixturenames and marked("pooled") and not marked("not_pooled"):
        metafunc.parametrize("database_url", ["direct", "pgbouncer"], indirect=True)


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[pooler.PgBouncer]:
    """A PgBouncer in transaction pooling in front of the test server, for the whole run."""
    reason = pooler.available()
    if reason:
        pytest.skip(f"no PgBouncer: {reason}")
    with pooler.PgBouncer(SERVER_URL) as bouncer:
        yield bouncer


@pytest.fixture
def database_url(
    template_database: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A fresh, migrated database of its own for one test; under the ``pgbouncer`` parameter
    (see ``pooled``) its URL goes through PgBouncer in transaction mode, as DATABASE_URL does
    in such a deployment, with PAUTA_POOLER=transaction and PAUTA_LISTEN_URL the direct URL set
    for the worker processes and the app the test starts."""
    name = f"{RUN_ID}_{next(_copies)}"
    with _admin() as admin:
        admin.execute(f"CREATE DATABASE {name} TEMPLATE {template_database}")
    direct = url_for_database(name)
    if getattr(request, "param", "direct") == "pgbouncer":
        bouncer: pooler.PgBouncer = request.getfixturevalue("pgbouncer")
        monkeypatch.setenv("PAUTA_POOLER", "transaction")
        monkeypatch.setenv("PAUTA_LISTEN_URL", direct)
        pooler.unprepared_by_default(monkeypatch)
        yield bouncer.url(name)
    else:
        yield direct
    with _admin() as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection in autocommit mode: each statement commits unless a transaction is opened."""
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


@pytest.fixture
def workers(database_url: str) -> Iterator[list[WorkerProcess]]:
    """Start worker.py processes with ``start_worker(workers, ...)``; all are killed at the end."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.kill()


@pytest.fixture
def app(database_url: str) -> Iterator[Any]:
    from app import create_app
    from models import db

    application = create_app({"DATABASE_URL": database_url, "SECRET_KEY": "test", "TESTING": True})
    yield in_english(application)
    with application.app_context():
        db.engine.dispose()


@pytest.fixture
def client(app: Any) -> Any:
    return app.test_client()


@pytest.fixture
def cli(app: Any) -> Any:
    return app.test_cli_runner()
