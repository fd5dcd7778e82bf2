"""procrastinate adapter (https://procrastinate.readthedocs.io).

Settings and why:

* Connector: ``PsycopgConnector`` (psycopg 3 async pool), the connector the docs recommend;
  producers and the worker both use its async API (``defer_async``/``batch_defer_async``,
  ``run_worker_async`` inside ``open_async``), procrastinate's native mode.
* Schema: ``app.schema_manager.apply_schema_async()`` (what ``procrastinate schema --apply``
  runs).
* Worker: one ``run_worker_async`` with ``concurrency`` = the benchmark's concurrency (jobs
  handled at once) on one queue, LISTEN/NOTIFY on (default) so pickup does not wait for the
  5 s polling fallback.
* Profiles (``PROFILES``): ``defaults`` leaves the connector's pool at psycopg_pool's default
  size (4 connections); ``best`` sizes the worker's pool ``concurrency + 2`` (one per job
  running at once, plus the listener and the heartbeat/abort pollers), so the pool is not the
  limit at concurrency 10 (the connector passes its arguments to the pool; this tuning is
  ours, procrastinate's docs name no other throughput knob for a worker). Everything else is
  left at procrastinate's defaults in both.
* Enqueue: ``Task.defer_async`` per job (one INSERT through ``procrastinate_defer_jobs_v2``,
  autocommit, so one transaction per job); bulk is ``Task.batch_defer_async`` (one multi-row
  call per batch), the documented batch API.
* Completed: with the default ``delete_jobs="never"`` a finished job stays in
  ``procrastinate_jobs`` with status ``succeeded``. The drain is done when no job is ``todo``
  or ``doing`` (served by procrastinate's partial index on those statuses); the ``succeeded``
  count is checked afterwards.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from importlib.metadata import version
from typing import ClassVar

import procrastinate
import psycopg
from procrastinate.types import JSONDict

from bench.peers._common import EnqueueRun, Pacer, PeerBase, parse_runner_args

QUEUE = "bench"
TASK = "bench"
TABLES = (
    "procrastinate_jobs",
    "procrastinate_events",
    "procrastinate_periodic_defers",
    "procrastinate_workers",
)


def _app(dsn: str, pool_size: int | None = None) -> procrastinate.App:
    sizes = {} if pool_size is None else {"min_size": pool_size, "max_size": pool_size}
    connector = procrastinate.PsycopgConnector(conninfo=dsn, **sizes)
    return procrastinate.App(connector=connector)


class Peer(PeerBase):
    name = "procrastinate"
    version = version("procrastinate")
    PROFILES: ClassVar[dict[str, str]] = {
        "defaults": "PsycopgConnector with psycopg_pool's default pool (4)",
        "best": "PsycopgConnector, worker pool sized concurrency + 2",
    }

    def setup(self) -> None:
        asyncio.run(self._setup())

    async def _setup(self) -> None:
        app = _app(self.dsn)
        async with app.open_async():
            await app.schema_manager.apply_schema_async()

    def reset(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")

    def _enqueue_each(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        return asyncio.run(self._enqueue_each_async(seqs, interval))

    async def _enqueue_each_async(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        app = _app(self.dsn)
        deferrer = app.configure_task(TASK, queue=QUEUE)
        stamps: list[float] = []
        async with app.open_async():
            pacer = Pacer(interval)
            start = time.perf_counter()
            for seq in seqs:
                await deferrer.defer_async(seq=seq)
                stamps.append(time.time())
                if interval:
                    await asyncio.sleep(pacer.delay())
            elapsed = time.perf_counter() - start
        return EnqueueRun(elapsed, stamps)

    def _enqueue_batches(self, n: int, batch: int) -> float:
        return asyncio.run(self._enqueue_batches_async(n, batch))

    async def _enqueue_batches_async(self, n: int, batch: int) -> float:
        app = _app(self.dsn)
        deferrer = app.configure_task(TASK, queue=QUEUE)
        async with app.open_async():
            start = time.perf_counter()
            for low in range(0, n, batch):
                jobs: list[JSONDict] = [{"seq": seq} for seq in range(low, min(low + batch, n))]
                await deferrer.batch_defer_async(*jobs)
            return time.perf_counter() - start

    def _is_drained(self, conn: psycopg.Connection, n: int) -> bool:
        row = conn.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM procrastinate_jobs WHERE status IN ('todo', 'doing'))"
        ).fetchone()
        return bool(row and row[0])

    def _count_completed(self, conn: psycopg.Connection) -> int:
        row = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()
        return int(row[0]) if row else 0


async def _run_worker() -> None:
    args = parse_runner_args()
    app = _app(args.dsn, args.concurrency + 2 if args.profile == "best" else None)

    @app.task(name=TASK, queue=QUEUE)
    async def bench(seq: int) -> None:
        args.recorder.record(seq)

    async with app.open_async():
        await app.run_worker_async(queues=[QUEUE], concurrency=args.concurrency)


if __name__ == "__main__":
    asyncio.run(_run_worker())
