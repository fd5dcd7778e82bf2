"""Pauta behind PgBouncer in transaction pooling: what breaks there, and that Pauta keeps clear.

The engine's and the console's key tests also run through PgBouncer (the ``pooled`` marker, see
tests/conftest.py). These tests pin what those cannot: prepared statements, LISTEN, session
state, and the settings that choose between them.
"""

import re
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from jobqueue import enqueue
from jobqueue.queries import all_queries
from jobqueue.settings import SettingsError, WorkerSettings, argument_parser, load_settings
from tests.support import pgbouncer as pooler
from tests.support.db import scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

ROOT = Path(__file__).resolve().parents[1]
Conn = psycopg.Connection[Any]


def direct_database(database_url: str) -> str:
    return make_url(database_url).database or ""


# -- what the pooler does to session state --------------------------------------------------------


def test_server_side_prepared_statements_collide_through_a_transaction_pooler(
    database_url: str,
) -> None:
    """Two clients on one server connection, both preparing: psycopg names its statements
    ``_pg3_0``, ``_pg3_1``... per client, so the second client's first prepared statement
    meets the first client's. ``prepare_after`` for a transaction pooler turns preparing off,
    and the same traffic goes through."""
    reason = pooler.available()
    if reason:
        pytest.skip(f"no PgBouncer: {reason}")
    settings = WorkerSettings(
        database_url=database_url, queues={"default": 1}, pooler="transaction"
    )
    assert settings.prepare_after is None
    with pooler.PgBouncer(database_url, pool_size=1) as bouncer:
        url = bouncer.url(direct_database(database_url))

        def two_clients(threshold: int | None) -> None:
            with (
                psycopg.connect(url, autocommit=True, prepare_threshold=threshold) as one,
                psycopg.connect(url, autocommit=True, prepare_threshold=threshold) as two,
            ):
                for _ in range(3):
                    one.execute("SELECT count(*) FROM jobs WHERE id > %s", (0,)).fetchone()
                    two.execute("SELECT count(*) FROM jobs WHERE id < %s", (0,)).fetchone()

        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            two_clients(0)  # prepare at once: what psycopg does at its fifth run by default
        two_clients(settings.prepare_after)


def test_the_engine_and_web_code_keep_no_session_state() -> None:
    """Nothing a transaction pooler drops between transactions: no session advisory lock, no
    SET outside a transaction (SET LOCAL and set_config(..., true) are fine), no SQL PREPARE,
    no WITH HOLD cursor, no temporary table, and LISTEN only in the runner's listener."""
    # SQL keywords are upper case in this code base, which keeps prose out of the matches.
    forbidden = {
        "a session advisory lock": re.compile(r"pg_(try_)?advisory_lock(_shared)?\s*\(", re.I),
        "a session-level SET": re.compile(r"""(^|;|["'])\s*SET\s+(?!LOCAL\b)\w+\s*(=|TO\b)"""),
        "a session-level set_config": re.compile(r"set_config\([^)]*,\s*false\s*\)", re.I),
        "an SQL PREPARE": re.compile(r"""(^|;|["'])\s*PREPARE\s+\w+"""),
        "a WITH HOLD cursor": re.compile(r"\bWITH\s+HOLD\b", re.I),
        "a temporary table": re.compile(r"\bCREATE\s+(TEMP|TEMPORARY)\b", re.I),
        "a LISTEN": re.compile(r"""(^|;|["'])\s*LISTEN\s"""),
    }
    sources = [ROOT / "jobqueue" / "queries.sql", ROOT / "app.py", ROOT / "worker.py"]
    for package in ("jobqueue", "hr", "blueprints", "console", "models", "commands"):
        sources += sorted((ROOT / package).rglob("*.py"))
    found = []
    for path in sources:
        text = path.read_text()
        for what, pattern in forbidden.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                where = f"{path.relative_to(ROOT)}:{line}"
                if what == "a LISTEN" and where.startswith("jobqueue/runner.py"):
                    continue  # the listener, on PAUTA_LISTEN_URL (never through the pooler)
                if what == "a session-level SET" and re.search(
                    r"SET (jit|plan_cache_mode)", match.group(0)
                ):
                    if where.startswith("jobqueue/connections.py"):
                        continue  # on a Link that is not pooled only (test_connections.py)
                found.append(f"{where}: {what}")
    assert found == []
    # The pattern would see what it forbids (a check that cannot fail proves nothing).
    assert forbidden["a session-level SET"].search("conn.execute('SET lock_timeout = 1')")
    assert not forbidden["a session-level SET"].search("UPDATE jobs SET state = 'x'")
    assert all(not forbidden["a LISTEN"].search(query.sql) for query in all_queries().values())


# -- which connection does what -------------------------------------------------------------------


def test_the_pooler_setting_turns_preparing_and_listen_off_unless_told_otherwise() -> None:
    parser = argument_parser("worker.py", None)
    direct = load_settings(parser.parse_args([]), {"DATABASE_URL": "postgresql:///a"})
    assert (direct.prepare_after, direct.notify_url) == (5, "postgresql:///a")
    pooled_env = {"DATABASE_URL": "postgresql://bouncer/a", "PAUTA_POOLER": "transaction"}
    pooled = load_settings(parser.parse_args([]), pooled_env)
    assert (pooled.prepare_after, pooled.notify_url) == (None, None)
    listening = load_settings(
        parser.parse_args(["--prepare-threshold", "off"]),
        {**pooled_env, "PAUTA_LISTEN_URL": "postgresql://db/a", "PAUTA_PREPARE_THRESHOLD": "9"},
    )
    assert (listening.prepare_after, listening.notify_url) == (None, "postgresql://db/a")
    counted = load_settings(parser.parse_args([]), {**pooled_env, "PAUTA_PREPARE_THRESHOLD": "0"})
    assert counted.prepare_after == 0  # PgBouncer 1.22+ with max_prepared_statements only
    for bad in ({"PAUTA_POOLER": "session"}, {"PAUTA_PREPARE_THRESHOLD": "-1"}):
        with pytest.raises(SettingsError):
            load_settings(parser.parse_args([]), {"DATABASE_URL": "postgresql:///a", **bad})


def test_the_web_app_does_not_prepare_behind_a_transaction_pooler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app import create_app

    settings = {"DATABASE_URL": "postgresql:///nowhere", "SECRET_KEY": "test"}
    assert create_app(settings).config["SQLALCHEMY_ENGINE_OPTIONS"]["connect_args"] == {
        "prepare_threshold": 5
    }
    monkeypatch.setenv("PAUTA_POOLER", "transaction")
    assert create_app(settings).config["SQLALCHEMY_ENGINE_OPTIONS"]["connect_args"] == {
        "prepare_threshold": None
    }


def listeners(conn: Conn) -> int:
    return int(
        scalar(
            conn,
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query ILIKE 'LISTEN %%'",
        )
    )


def test_behind_the_pooler_with_no_listen_url_a_worker_polls_and_backs_off(
    conn: Conn, database_url: str, pgbouncer: pooler.PgBouncer, workers: list[WorkerProcess]
) -> None:
    """No LISTEN is sent through the pooler (it would be lost); the fetch loop polls instead,
    quickly after a claim that found work and backing off to ``--poll`` while idle."""
    url = pgbouncer.url(direct_database(database_url))
    env = {"PAUTA_POOLER": "transaction", "PAUTA_LISTEN_URL": ""}
    worker = start_worker(workers, url, "--single", "--queues", "default=1", "--poll", "2", env=env)
    worker.wait_for_line(r"no LISTEN .* polling every 0\.05 to 2s with jitter")
    time.sleep(2.5)  # idle long enough for the polls to have backed off to --poll
    first = enqueue(conn, "noop")
    wait_until(lambda: scalar(conn, "SELECT state FROM jobs WHERE id = %s", first) == "succeeded")
    second = enqueue(conn, "noop")  # right after a claim that found work: polled for soon
    wait_until(lambda: scalar(conn, "SELECT state FROM jobs WHERE id = %s", second) == "succeeded")
    waited = scalar(
        conn,
        "SELECT a.started_at - j.available_at FROM job_attempts a JOIN jobs j ON j.id = a.job_id"
        " WHERE a.job_id = %s",
        second,
    )
    assert waited.total_seconds() < 1.0, f"the second job waited {waited} for a poll"
    assert listeners(conn) == 0


def test_with_a_listen_url_a_pooled_worker_is_woken_at_commit(
    conn: Conn, database_url: str, pgbouncer: pooler.PgBouncer, workers: list[WorkerProcess]
) -> None:
    """kills: listener-ignores-notifications"""
    url = pgbouncer.url(direct_database(database_url))
    env = {"PAUTA_POOLER": "transaction", "PAUTA_LISTEN_URL": database_url}
    start_worker(workers, url, "--single", "--queues", "default=1", "--poll", "30", env=env)
    assert listeners(conn) == 1
    time.sleep(0.3)  # idle: the fetch loop is now in its 30 s wait
    job = enqueue(conn, "noop")
    committed = time.monotonic()
    wait_until(
        lambda: scalar(conn, "SELECT state FROM jobs WHERE id = %s", job) == "succeeded",
        timeout=10,
        interval=0.005,
    )
    assert time.monotonic() - committed < 5  # a sixth of the poll: woken, on the slowest machine
