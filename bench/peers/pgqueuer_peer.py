"""PGQueuer adapter (https://github.com/janbjorge/pgqueuer).

Profiles (``PROFILES``):

* ``defaults``: what PGQueuer's README and ``pgq run`` set up. Schema by ``Queries.install()``
  (``pgq install``); driver asyncpg (``AsyncpgDriver`` over one direct connection, the driver of
  the README's examples) on both sides; the event loop is uvloop, which ``pgq run`` uses
  whenever it is installed and which PGQueuer depends on; ``batch_size`` 10, its default.
* ``best``: the same plus ``Queries.optimize_autovacuum()`` (``pgq autovac``, the first item of
  its performance checklist). The rest of that checklist is already in the defaults above
  (asyncpg, uvloop, a direct connection so LISTEN/NOTIFY stays on one session, ``batch_size``
  10 for short jobs). Durability stays ``durable`` (logged tables) in both: the ``balanced``
  and ``volatile`` modes put jobs in unlogged tables, a guarantee the other systems keep.

Both profiles:

* Worker: a ``QueueManager`` (no ``SchedulerManager``: there are no cron jobs to poll for)
  started through ``pgqueuer.run``, the programmatic twin of ``pgq run``; pickup is driven by
  its LISTEN/NOTIFY listener.
* Concurrency: the benchmark's ``concurrency`` (jobs handled at once) is ``batch_size``, the
  number of jobs one dequeue claims and the worker then holds; at 10, PGQueuer's default.
  ``max_concurrent_tasks`` stays unset (its default, unlimited): it must be at least
  2 x ``batch_size``, so it cannot express 10 at once with the default batch.
* Enqueue: ``Queries.enqueue(entrypoint, payload)`` per job (one INSERT, autocommit, so one
  transaction per job); bulk is the list form of the same call (one multi-row INSERT).
* Completed: a finished job's row is deleted from ``pgqueuer`` and logged in ``pgqueuer_log``
  with status ``successful`` in one statement (flushed by the worker's log buffer every
  ``batch_size`` jobs or 0.1 s). The drain is done when ``pgqueuer`` is empty; the log count
  is checked afterwards.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import version
from typing import ClassVar

import asyncpg
import psycopg
import uvloop
from pgqueuer import AsyncpgDriver, Job, Queries, QueueManager, run

from bench.peers._common import EnqueueRun, Pacer, PeerBase, RunnerArgs, parse_runner_args

ENTRYPOINT = "bench"


@asynccontextmanager
async def _queries(dsn: str) -> AsyncIterator[Queries]:
    conn = await asyncpg.connect(dsn)
    try:
        yield Queries(AsyncpgDriver(conn))
    finally:
        await conn.close()


def _payload(seq: int) -> bytes:
    return str(seq).encode()


class Peer(PeerBase):
    name = "pgqueuer"
    version = version("pgqueuer")
    PROFILES: ClassVar[dict[str, str]] = {
        "defaults": "pgq install; asyncpg, uvloop, batch_size 10",
        "best": "pgq install + pgq autovac; asyncpg, uvloop, batch_size 10",
    }

    def setup(self) -> None:
        uvloop.run(self._setup())

    async def _setup(self) -> None:
        async with _queries(self.dsn) as queries:
            await queries.install()
            if self.profile == "best":
                await queries.optimize_autovacuum()

    def reset(self) -> None:
        uvloop.run(self._reset())

    async def _reset(self) -> None:
        async with _queries(self.dsn) as queries:
            await queries.clear_queue()
            await queries.clear_queue_log()
            await queries.clear_statistics_log()

    def _enqueue_each(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        return uvloop.run(self._enqueue_each_async(seqs, interval))

    async def _enqueue_each_async(self, seqs: Sequence[int], interval: float) -> EnqueueRun:
        stamps: list[float] = []
        async with _queries(self.dsn) as queries:
            pacer = Pacer(interval)
            start = time.perf_counter()
            for seq in seqs:
                await queries.enqueue(ENTRYPOINT, _payload(seq))
                stamps.append(time.time())
                if interval:
                    await asyncio.sleep(pacer.delay())
            elapsed = time.perf_counter() - start
        return EnqueueRun(elapsed, stamps)

    def _enqueue_batches(self, n: int, batch: int) -> float:
        return uvloop.run(self._enqueue_batches_async(n, batch))

    async def _enqueue_batches_async(self, n: int, batch: int) -> float:
        async with _queries(self.dsn) as queries:
            start = time.perf_counter()
            for low in range(0, n, batch):
                seqs = range(low, min(low + batch, n))
                await queries.enqueue(
                    [ENTRYPOINT] * len(seqs), [_payload(seq) for seq in seqs], [0] * len(seqs)
                )
            return time.perf_counter() - start

    def _is_drained(self, conn: psycopg.Connection, n: int) -> bool:
        row = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM pgqueuer)").fetchone()
        return bool(row and row[0])

    def _count_completed(self, conn: psycopg.Connection) -> int:
        row = conn.execute(
            "SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'"
        ).fetchone()
        return int(row[0]) if row else 0


@asynccontextmanager
async def _queue_manager(args: RunnerArgs) -> AsyncIterator[QueueManager]:
    conn = await asyncpg.connect(args.dsn)
    try:
        qm = QueueManager(Queries(AsyncpgDriver(conn)))

        @qm.entrypoint(ENTRYPOINT)
        async def handle(job: Job) -> None:
            args.recorder.record(int(job.payload or b"0"))

        yield qm
    finally:
        await conn.close()


def main() -> None:
    args = parse_runner_args()
    uvloop.run(run(functools.partial(_queue_manager, args), batch_size=args.concurrency))


if __name__ == "__main__":
    main()
