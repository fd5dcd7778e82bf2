"""awa-pg adapter (https://github.com/hardbyte/awa): Rust core with Python bindings.

Settings and why:

* Schema: ``Client.migrate()`` then ``Client.install_queue_storage()``. awa 0.6 runs on its
  "queue storage" engine (append-only ready entries plus rotating receipt rings); on a fresh
  install the first worker would switch to it by itself, ``install_queue_storage`` does the
  same explicitly so no measurement runs on the legacy canonical tables.
* Producers: the synchronous ``awa.Client`` (the docs' client for producers); ``insert`` per
  job (one transaction per job) and ``enqueue_many_copy`` for bulk, the COPY path its README
  recommends for high-volume Python producers.
* Worker: ``AsyncClient`` with an async handler, hard-reserved mode with ``max_workers`` = the
  benchmark's concurrency (jobs handled at once), LISTEN/NOTIFY wake-ups with the 200 ms poll
  fallback, default ring sizes.
* Profiles (``PROFILES``): ``defaults`` is ``start([(queue, concurrency)])``; ``best`` gives the
  queue as a dict with ``claimers`` 2, the knob ``AsyncClient.start``'s documentation names for
  hot queues ("benchmark 2 or 4 before raising it further"; 2, on this 2-core machine); the
  claim batch size stays its default.
* Reset: ``install_queue_storage(reset=True)``, the library's way to recreate the queue
  storage tables (a plain TRUNCATE would desynchronise its ring and lane state).
* Completed: a completed job is recorded in ``awa.receipt_completion_batches`` (one row per
  completion batch with ``completed_count``; deleting a completed job adds a row to
  ``awa.receipt_completion_tombstones``) or in ``awa.done_entries`` with state
  ``completed``; when a ring partition is pruned its count moves to
  ``awa.queue_terminal_rollups.pruned_completed_count``. These counts are what the
  ``awa.terminal_jobs`` view lists (that view joins every row back to its ready entry and
  took minutes on 20,000 jobs), and the drain is done when they add up to n. awa's
  ``queue_stats()``/``list_jobs()`` took 35-250 ms per call here, too slow to poll every
  5 ms, hence the direct SQL.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import ClassVar

import awa
import psycopg

from bench.peers._common import EnqueueRun, PeerBase, enqueue_each_paced, parse_runner_args

QUEUE = "bench"

COMPLETED_SQL = """
SELECT (SELECT coalesce(sum(completed_count), 0) FROM awa.receipt_completion_batches)
     - (SELECT count(*) FROM awa.receipt_completion_tombstones)
     + (SELECT count(*) FROM awa.done_entries WHERE state = 'completed')
     + (SELECT coalesce(sum(pruned_completed_count), 0) FROM awa.queue_terminal_rollups)
"""


@dataclass
class BenchJob:
    seq: int


class Peer(PeerBase):
    name = "awa-pg"
    version = version("awa-pg")
    PROFILES: ClassVar[dict[str, str]] = {
        "defaults": "start([(queue, concurrency)])",
        "best": "queue dict with claimers 2",
    }

    def setup(self) -> None:
        with awa.Client(self.dsn) as client:
            client.migrate()
            client.install_queue_storage()

    def reset(self) -> None:
        with awa.Client(self.dsn) as client:
            client.install_queue_storage(reset=True)

    def _enqueue_each(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        with awa.Client(self.dsn) as client:
            return enqueue_each_paced(
                lambda seq: client.insert(BenchJob(seq), queue=QUEUE), seqs, interval
            )

    def _enqueue_batches(self, n: int, batch: int) -> float:
        with awa.Client(self.dsn) as client:
            start = time.perf_counter()
            for low in range(0, n, batch):
                jobs = [BenchJob(seq) for seq in range(low, min(low + batch, n))]
                client.enqueue_many_copy(jobs, queue=QUEUE)
            return time.perf_counter() - start

    def _is_drained(self, conn: psycopg.Connection, n: int) -> bool:
        return self._count_completed(conn) >= n

    def _count_completed(self, conn: psycopg.Connection) -> int:
        row = conn.execute(COMPLETED_SQL).fetchone()
        return int(row[0]) if row else 0


async def _run_worker() -> None:
    args = parse_runner_args()
    client = awa.AsyncClient(args.dsn)

    @client.task(BenchJob, queue=QUEUE)
    async def handle(job: awa.Job[BenchJob]) -> None:
        args.recorder.record(job.args.seq)

    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if args.profile == "best":
        await client.start([{"name": QUEUE, "max_workers": args.concurrency, "claimers": 2}])
    else:
        await client.start([(QUEUE, args.concurrency)])
    await stop.wait()
    await client.shutdown()


if __name__ == "__main__":
    asyncio.run(_run_worker())
