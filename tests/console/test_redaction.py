"""Worker names are found in any text, blanked pattern included, and nothing else is."""

from console.redaction import hide_worker_names


def test_worker_names_are_hidden_wherever_they_appear() -> None:
    swept = "LeaseExpired: worker web-1.internal:4242:9f2c1a stopped renewing its lease"
    assert hide_worker_names(swept) == "LeaseExpired: worker (a worker) stopped renewing its lease"
    pattern = "LeaseExpired: worker web-#.internal:#:# stopped renewing its lease"  # as grouped
    assert (
        hide_worker_names(pattern) == "LeaseExpired: worker (a worker) stopped renewing its lease"
    )
    assert hide_worker_names("drained by host:77:supervisor") == "drained by (a worker)"
    assert hide_worker_names("by host:#:abcdef.") == "by (a worker)."
    untouched = "TimeoutError: job 17 timed out after 30.5s at 14:05:00 (db:5432)"
    assert hide_worker_names(untouched) == untouched
    assert hide_worker_names(None) is None
