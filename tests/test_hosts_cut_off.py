"""Worker hosts cut off from the database by the network, as network namespaces.

Three worker hosts, each a network namespace joined to the database's namespace by a veth pair
of its own (tests/support/netns.py), each running ``worker.py``. One host's link goes down for
longer than a lease while it runs jobs: the others rescue its jobs within a lease and a sweep;
it notices that its heartbeat does not get through and stops claiming; when the link comes back
its late results are fenced out and it claims again, the same process. Every job ends
succeeded once; only the jobs the cut-off host was running ran twice.
"""

import re
import signal
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from devtools.cluster import Cluster
from jobqueue import JobRequest, enqueue_many
from tests.support import netns
from tests.support.db import create_test_tables, scalar
from tests.support.processes import WorkerProcess, start_worker, wait_until

Conn = psycopg.Connection[Any]
LEASE, HEARTBEAT, SWEEP = 6.0, 1.0, 1.0
WORKER_ARGS = (
    "--single", "--queues", "default=2", "--prefetch", "0", "--poll", "0.5",
    "--lease", str(LEASE), "--heartbeat", str(HEARTBEAT), "--sweep", str(SWEEP),
    "--leader-lease-seconds", "3", "--lost-after-seconds", "3",
)  # fmt: skip


@pytest.fixture
def network() -> Iterator[netns.Network]:
    reason = netns.unavailable()
    if reason:
        pytest.skip(f"no network namespaces: {reason}")
    with netns.Network(hosts=3) as network:
        yield network


@pytest.fixture
def server(network: netns.Network) -> Iterator[tuple[Cluster, str]]:
    """A server of its own inside the database's namespace, listening on each link's address;
    the test reaches it over its Unix socket. A backend whose client vanished mid-transaction
    would hold its row locks, so idle transactions end after 5 s, as the HA how-to advises."""
    listen = ",".join(network.server_address(n) for n in range(1, len(network.hosts) + 1))
    settings = {
        "listen_addresses": f"'{listen}'",
        "idle_in_transaction_session_timeout": "'5s'",
    }
    with Cluster(settings, wrapper=network.exec_prefix(network.database)) as cluster:
        cluster.trust("10.213.0.0/16")
        with psycopg.connect(cluster.socket_url(), autocommit=True) as admin:
            admin.execute("CREATE DATABASE pauta")
        url = cluster.socket_url("pauta")
        from flask_migrate import upgrade

        from app import create_app
        from models import db

        app = create_app({"DATABASE_URL": url, "SECRET_KEY": "test"})
        with app.app_context():
            upgrade()
            db.engine.dispose()
        yield cluster, url


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """worker.py processes (on the cluster of this test, not the shared test server)."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.kill()


def host_url(network: netns.Network, cluster: Cluster, n: int) -> str:
    return f"postgresql://postgres@{network.server_address(n)}:{cluster.port}/pauta"


def start_host(
    workers: list[WorkerProcess], network: netns.Network, cluster: Cluster, n: int
) -> tuple[WorkerProcess, str]:
    prefix = network.exec_prefix(network.hosts[n - 1])
    worker = start_worker(workers, host_url(network, cluster, n), *WORKER_ARGS, prefix=prefix)
    name = re.search(r"worker (\S+) ready", worker.wait_for_line(r"ready; queues"))
    assert name is not None
    return worker, name.group(1)


def settled_holdings(conn: psycopg.Connection[Any], worker: str) -> list[tuple[int, int]]:
    """The (job id, attempt) pairs ``worker`` holds once what it sent before its link went down
    has landed: a claim or a result already past the host's link still commits at the server a
    moment later (under load, after a first read: the set of jobs it held then never matched
    the rescued ones). Read until two reads half a second apart agree; nothing it holds can be
    rescued before a lease has passed."""
    query = "SELECT id, attempt FROM jobs WHERE locked_by = %s AND state = 'running' ORDER BY id"
    before = conn.execute(query, (worker,)).fetchall()
    while True:
        conn.execute("SELECT pg_sleep(0.5)")
        now = conn.execute(query, (worker,)).fetchall()
        if now == before:
            return [(int(job_id), int(attempt)) for job_id, attempt in now]
        before = now


def test_a_host_cut_off_longer_than_a_lease_is_rescued_fenced_and_rejoins(
    network: netns.Network, server: tuple[Cluster, str], workers: list[WorkerProcess]
) -> None:
    cluster, url = server
    with psycopg.connect(url, autocommit=True) as conn:
        create_test_tables(conn)
        with conn.transaction():
            ids = enqueue_many(conn, [JobRequest("nap_then_record", {"seconds": 0.4})] * 150)
        hosts = [start_host(workers, network, cluster, n) for n in (1, 2, 3)]
        (cut_worker, cut_name), others = hosts[0], hosts[1:]
        wait_until(
            lambda: scalar(conn, "SELECT count(*) FROM started WHERE worker = %s", cut_name) >= 4,
            message="the first host never ran jobs",
        )

        network.cut(1)
        cut_at = scalar(conn, "SELECT now()")
        held_attempts = settled_holdings(conn, cut_name)
        held = [job_id for job_id, _ in held_attempts]
        assert held, "the cut-off host held no job at the cut"

        # The others rescue what it held, within a lease and a sweep of its last renewal.
        rescued = wait_until(
            lambda: scalar(
                conn,
                "SELECT CASE WHEN count(DISTINCT job_id) = %s THEN max(finished_at) END"
                " FROM job_attempts"
                " WHERE worker = %s AND outcome = 'lease_expired' AND job_id = ANY(%s)",
                len(held),
                cut_name,
                held,
            ),
            timeout=LEASE + 10,
            message="the cut-off host's jobs were not rescued",
        )
        assert (rescued - cut_at).total_seconds() <= LEASE + 1.2 * SWEEP + 1.5
        cut_worker.wait_for_line(r"leases not renewed for .* not claiming", timeout=30)
        claimed_while_cut = scalar(conn, "SELECT count(*) FROM jobs WHERE locked_by = %s", cut_name)
        assert claimed_while_cut == 0

        network.mend(1)
        cut_worker.wait_for_line(r"the heartbeat got through again; claiming", timeout=30)
        wait_until(
            lambda: scalar(conn, "SELECT count(*) FROM jobs WHERE state = 'succeeded'") == 150,
            timeout=60,
            message="not every job succeeded",
        )
        for job_id in held:  # its late results (or its renewals) met the fence
            cut_worker.wait_for_line(rf"lost job {job_id} attempt \d+", timeout=30)

        # It rejoins, the same process: alone now, it runs new jobs.
        for worker, _name in others:
            worker.signal(signal.SIGTERM)
            assert worker.wait() == 0
        with conn.transaction():
            later = enqueue_many(conn, [JobRequest("nap_then_record", {"seconds": 0.0})] * 5)
        wait_until(
            lambda: (
                scalar(
                    conn,
                    "SELECT count(*) FROM job_attempts WHERE job_id = ANY(%s)"
                    " AND outcome = 'succeeded' AND worker = %s",
                    later,
                    cut_name,
                )
                == 5
            ),
            timeout=30,
            message="the host that was cut off did not take new work",
        )
        assert cut_worker.process.poll() is None

        succeeded = conn.execute(
            "SELECT job_id, count(*) FROM job_attempts WHERE job_id = ANY(%s)"
            " AND outcome = 'succeeded' GROUP BY job_id",
            (ids,),
        ).fetchall()
        assert sorted(job_id for job_id, _ in succeeded) == sorted(ids)
        assert all(count == 1 for _, count in succeeded)
        # The attempts it held at the cut ended as rescued, whatever it reported later (it may
        # have claimed one of those jobs again once back: a later attempt).
        for job_id, attempt in held_attempts:
            outcome = scalar(
                conn,
                "SELECT outcome FROM job_attempts WHERE job_id = %s AND attempt = %s",
                job_id,
                attempt,
            )
            assert outcome == "lease_expired"
        twice = {
            job_id
            for (job_id,) in conn.execute(
                "SELECT job_id FROM runs WHERE job_id = ANY(%s) GROUP BY job_id"
                " HAVING count(*) > 1",
                (ids,),
            )
        }
        assert twice <= set(held), "a job the cut-off host was not running ran twice"
        assert (
            scalar(conn, "SELECT count(DISTINCT job_id) FROM runs WHERE job_id = ANY(%s)", ids)
            == 150
        )
