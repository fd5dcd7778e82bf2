"""Audit entries read as sentences, from their columns alone."""

from console.audit_text import describe, ids


def test_job_actions_read_as_sentences() -> None:
    assert describe("job.requeue", "job", "12", 1,
                    {"task": "send", "was": "dead", "attempt_budget": 5, "job_ids": [12]}) == (
        "Requeued dead job #12 (send) with 5 more attempts."
    )  # fmt: skip
    assert describe("job.requeue", "job", "12", 1, {"task": "send", "attempt_budget": 1}) == (
        "Requeued job #12 (send) with 1 more attempt."
    )
    assert describe("job.cancel", "job", "3", 1, {"task": "noop"}) == (
        "Cancelled job #3 (noop): it will not run."
    )
    assert describe("job.run_now", "job", "4", 1,
                    {"task": "noop", "was_due": "2026-11-30T15:00:00+01:00"}) == (
        "Made job #4 (noop) run now; it was due 30 Nov 14:00:00 UTC."
    )  # fmt: skip
    details = {"task": "fail", "last_error": "KeyError: 'x'\nTraceback...", "job_ids": [5]}
    discarded = describe("job.discard", "job", "5", 1, details)
    assert discarded == "Discarded dead job #5 (fail), whose last error was “KeyError: 'x'”."


def test_group_queue_and_worker_actions_read_as_sentences() -> None:
    assert describe("job.requeue", "failure_group", "ab12", 3,
                    {"task": "fail", "selected": False, "job_ids": [7, 8, 9]}) == (
        "Requeued 3 dead fail jobs of a failure group (the whole group): #7, #8 and #9."
    )  # fmt: skip
    assert describe("job.discard", "failure_group", "ab12", 1,
                    {"task": "fail", "selected": True, "job_ids": [7]}) == (
        "Discarded 1 dead fail job of a failure group (the jobs ticked): #7."
    )  # fmt: skip
    assert describe("queue.pause", "queue", "mail", 1, {}) == (
        "Paused queue mail: workers claim none of its jobs until it is resumed."
    )
    assert describe("queue.resume", "queue", "mail", 1, {}) == "Resumed queue mail."
    assert describe("worker.drain", "worker", "4", 2,
                    {"name": "web-1:42:supervisor", "worker_ids": [4, 5]}) == (
        "Asked web-1:42:supervisor to shut down gracefully (2 processes)."
    )  # fmt: skip
    assert describe("worker.drain", "worker", "all", 1, {"worker_ids": [9]}) == (
        "Asked every running worker to shut down gracefully (1 process)."
    )


def test_long_id_lists_are_cut_and_counted() -> None:
    assert ids([]) == "" and ids([1]) == "#1" and ids([1, 2]) == "#1 and #2"
    assert ids(list(range(1, 1026))).endswith("#19, #20 and 1,005 more")
