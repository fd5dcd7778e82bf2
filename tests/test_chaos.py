"""A short chaos run (the long one is `make chaos`): two worker.py processes drain a ledgered
queue while every kind of fault is injected at least once, on a PostgreSQL cluster of the test's
own (it is restarted in immediate mode). Every verdict comes from the rows."""

import shutil

import pytest

from bench.chaos import FAULT_KINDS, ChaosSettings, report, run
from devtools.cluster import server_binaries


def binaries_present() -> bool:
    try:
        server_binaries()
    except RuntimeError:
        return False
    return shutil.which("runuser") is not None


@pytest.mark.skipif(not binaries_present(), reason="PostgreSQL server binaries are not installed")
def test_a_short_chaos_run_loses_nothing_and_repeats_only_interrupted_runs() -> None:
    settings = ChaosSettings(jobs=4000, workers=2, threads=4, faults=8, pause=0.01, seed=7)
    result = run(settings)
    summary = report(result)
    assert {fault.kind for fault in result.injected} == set(FAULT_KINDS), summary
    assert result.ledger.lost == [] and result.ledger.left_running == 0, summary
    assert result.ledger.unexplained == [] and result.ledger.unexpected == [], summary
    assert result.ledger.succeeded == 4000, summary
    assert result.stats_mismatches == {}, summary
    assert result.valid, summary
