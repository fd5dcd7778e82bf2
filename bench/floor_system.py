"""The floor: the least a job queue on psycopg can do, measured with the same protocol as the
systems (bench/peers/_common.py), so that `make bench` shows in every run how far this machine
lets any queue on the product's driver go.

It is not a queue anyone would run. A job is a row of ``floor_jobs`` (an id from a sequence,
the queue, the task, the payload) with its primary key and nothing else: no tenant, no claim
index, no attempt count, no lease. Enqueueing one is one statement, on an autocommit
connection, that inserts the row and sends the wake-up (``pg_notify``), so one round trip and
one commit, durable (``synchronous_commit`` on), as every system's. Its runner is one
connection that LISTENs and, when woken, claims by deleting: ``DELETE ... RETURNING`` of the
oldest rows, committed, and the handler is called in the same thread. No thread hands a job
over, no lease or attempt is written, and a crash between the claim and the handler loses the
job (at most once): less than any of the systems does for a job.

So each of its figures bounds the systems' from above (enqueue) or below (pickup) on this
machine and this driver: where the floor itself does not reach one of issue 16's goals against
the best peer, a queue on psycopg would have to do less for a job than this to reach it here,
and Pauta does more. bench.run measures it
for the single and bulk enqueue and the pickup latency only (``FLOOR_METRICS``), compares it
with the best peer, and reports Pauta's share of it; it is never counted as a peer.
"""

import json
import time
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any, ClassVar

import psycopg

from bench.peers._common import EnqueueRun, PeerBase, enqueue_each_paced, parse_runner_args

CHANNEL = "floor_jobs"
QUEUE = "default"
TASK = "bench_probe"

SCHEMA = """
CREATE TABLE floor_jobs (
    id bigserial PRIMARY KEY,
    queue text NOT NULL,
    task text NOT NULL,
    payload jsonb NOT NULL
)
"""
ENQUEUE = """
WITH job AS (
    INSERT INTO floor_jobs (queue, task, payload) VALUES (%(queue)s, %(task)s, %(payload)s::jsonb)
    RETURNING id
)
SELECT id, pg_notify('floor_jobs', %(queue)s) FROM job
"""
ENQUEUE_MANY = """
WITH jobs AS (
    INSERT INTO floor_jobs (queue, task, payload)
    SELECT %(queue)s, %(task)s, payload FROM jsonb_array_elements(%(payloads)s::jsonb) AS payload
    RETURNING id
)
SELECT array_agg(id), pg_notify('floor_jobs', %(queue)s) FROM jobs
"""
CLAIM = """
DELETE FROM floor_jobs
WHERE id IN (SELECT id FROM floor_jobs WHERE queue = %(queue)s ORDER BY id LIMIT %(limit)s
             FOR UPDATE SKIP LOCKED)
RETURNING (payload ->> 'seq')::int
"""


class Peer(PeerBase):
    name = "floor"
    version = version("psycopg")
    PROFILES: ClassVar[dict[str, str]] = {
        "best": "a bare job row (PK only), its insert and NOTIFY in one statement; claimed by "
        "DELETE ... RETURNING on the listening connection (psycopg, autocommit)",
    }

    def setup(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(SCHEMA)

    def reset(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("TRUNCATE floor_jobs")

    def _enqueue_each(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        with psycopg.connect(self.dsn, autocommit=True) as conn:

            def enqueue_one(seq: int) -> None:
                params = {"queue": QUEUE, "task": TASK, "payload": json.dumps({"seq": seq})}
                conn.execute(ENQUEUE, params).fetchone()

            return enqueue_each_paced(enqueue_one, seqs, interval)

    def _enqueue_batches(self, n: int, batch: int) -> float:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            started = time.perf_counter()
            for first in range(0, n, batch):
                payloads = json.dumps([{"seq": seq} for seq in range(first, min(first + batch, n))])
                conn.execute(ENQUEUE_MANY, {"queue": QUEUE, "task": TASK, "payloads": payloads})
            return time.perf_counter() - started

    def _is_drained(self, conn: psycopg.Connection[Any], n: int) -> bool:
        raise NotImplementedError("the floor is measured for enqueue and pickup only")

    def _count_completed(self, conn: psycopg.Connection[Any]) -> int:
        raise NotImplementedError("the floor is measured for enqueue and pickup only")


def main() -> None:
    """The runner: woken by the NOTIFY (or every half second), it claims the waiting jobs,
    ``concurrency`` at a time, and calls the handler (the recorder) for each. SIGTERM's default
    action ends it: it holds nothing that needs giving back."""
    args = parse_runner_args()
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        claim = {"queue": QUEUE, "limit": args.concurrency}
        while True:
            for _ in conn.notifies(timeout=0.5, stop_after=1):
                pass
            while seqs := [row[0] for row in conn.execute(CLAIM, claim, prepare=True)]:
                for seq in seqs:
                    args.recorder.record(seq)


if __name__ == "__main__":
    main()
