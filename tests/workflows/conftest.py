"""Fixtures for the workflow tests: the test workflows' tables, and slices run in this process."""

from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

import tests.support.workflows  # noqa: F401 - registers the test workflows
from jobqueue.cooperative import Group
from jobqueue.execution import run_job
from jobqueue.registry import registry as tasks
from jobqueue.store import AttemptResult, ClaimedJob, JobStore
from tests.support.workflows import create_workflow_test_tables
from workflows import QUEUE

Conn = psycopg.Connection[Any]
WORKER = "test-runner:1:slices"


@pytest.fixture
def wf_conn(conn: Conn) -> Conn:
    create_workflow_test_tables(conn)
    return conn


@pytest.fixture
def effects_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "effects.txt"
    path.touch()
    monkeypatch.setenv("WF_EFFECTS_FILE", str(path))
    return path


class Slices:
    """Runs the visible slice jobs in this process, as a worker would: claim, run, finish; with
    ``grouped``, each claim's slices together as a worker thread runs a batching task's
    (jobqueue.cooperative), so that every test using this fixture runs both ways."""

    def __init__(self, database_url: str, grouped: bool = False) -> None:
        self.url = database_url
        self.grouped = grouped

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        with psycopg.connect(self.url) as connection:  # commits when the block ends, as the pool
            yield connection

    def run_visible(self, limit: int = 1000) -> int:
        """Run every slice job visible now, including those made visible meanwhile."""
        ran = 0
        with psycopg.connect(self.url, autocommit=True) as connection:
            store = JobStore(connection)
            while ran < limit:
                claimed = store.claim(QUEUE, 10, WORKER, 30.0)
                if not claimed:
                    return ran
                for result in self._run(claimed):
                    assert result.outcome == "succeeded", result.error
                    store.finish([result], WORKER)
                    ran += 1
        return ran

    def _run(self, claimed: list[ClaimedJob]) -> list[AttemptResult]:
        if not self.grouped:
            return [run_job(job, tasks, WORKER, self._connection) for job in claimed]
        group = Group(self._connection)
        return group.run(
            [partial(run_job, job, tasks, WORKER, group.connection) for job in claimed]
        )


@pytest.fixture(params=["alone", "grouped"])
def slices(request: pytest.FixtureRequest, database_url: str) -> Slices:
    return Slices(database_url, grouped=request.param == "grouped")
