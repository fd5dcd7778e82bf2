"""devtools.cluster's ``recycle_wal``: a fresh cluster is left with WAL segments recycled ahead
of its insert position, as a server that has been running has them, so that a benchmark's
commits do not wait for new segments to be zero-filled (bench.workflows --cluster relies on
it)."""

import psycopg

from devtools.cluster import Cluster


def test_recycled_wal_segments_lie_ahead_of_the_insert_position() -> None:
    with Cluster() as cluster:
        pg_wal = cluster.data / "pg_wal"

        def segments_ahead() -> int:
            with psycopg.connect(cluster.url(), autocommit=True) as conn:
                row = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()
            assert row is not None
            names = [path.name for path in pg_wal.iterdir() if len(path.name) == 24]
            return sum(1 for name in names if name > row[0])

        assert segments_ahead() == 0  # a fresh cluster has only the segment it writes
        cluster.recycle_wal(6)
        assert segments_ahead() >= 5
