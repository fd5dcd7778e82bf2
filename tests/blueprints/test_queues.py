"""The console's pages and actions through the test client, as platform and HR admins."""

import re
from typing import Any

import psycopg
import pytest
from sqlalchemy.exc import IntegrityError

from console import search
from jobqueue import enqueue
from jobqueue.store import AttemptResult, JobStore
from models.people import Role
from tests.support.db import job_row, scalar
from tests.support.factories import (
    csrf_token,
    login_as,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)
from tests.support.jobs import add_attempt, make_job, register_worker

pytestmark = pytest.mark.pooled  # also through PgBouncer (tests/conftest.py)

Conn = psycopg.Connection[Any]


@pytest.fixture
def people(app: Any) -> dict[str, Any]:
    """Two tenants, a platform admin and each tenant's HR admin."""
    with seeding(app) as session:
        acme, globex = make_tenant(session, "acme"), make_tenant(session, "globex")
        return {
            "acme": acme.id,
            "globex": globex.id,
            "admin": make_user(session, system_tenant(session), Role.PLATFORM_ADMIN),
            "acme_hr": make_user(session, acme, Role.HR_ADMIN),
        }


def client_for(app: Any, user: Any) -> Any:
    client = app.test_client()
    login_as(client, user)
    return client


@pytest.fixture
def admin(app: Any, people: dict[str, Any]) -> Any:
    return client_for(app, people["admin"])


def post(client: Any, path: str, data: dict[str, Any] | None = None) -> Any:
    """A POST with the session's CSRF token, as the page's button sends it once its question
    (if it asks one) is answered."""
    token = csrf_token(client, "/my/reviews")
    return client.post(path, data={"confirmed": "1", **(data or {}), "csrf_token": token})


def flashed(client: Any, response: Any) -> str:
    """The page the action sent the browser to, with its flash message."""
    assert response.status_code == 303, response.get_data(as_text=True)
    return str(client.get(response.headers["Location"]).get_data(as_text=True))


def audit(conn: Conn) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT action, target_type, target_id, tenant_id, affected, details"
        " FROM audit_log ORDER BY id"
    ).fetchall()


# -- overview and queue pages ------------------------------------------------------------------


def test_the_overview_shows_every_queue_and_the_tenant_filter_narrows_it(
    admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    assert "No queue has seen a job yet" in admin.get("/queues/").get_data(as_text=True)
    for _ in range(3):
        make_job(conn, queue="mail", tenant_id=people["acme"])
    make_job(conn, queue="mail", tenant_id=people["globex"], delay=600)
    make_job(conn, queue="reports", tenant_id=people["globex"], state="dead", error="X: y")
    page = admin.get("/queues/").get_data(as_text=True)
    row = re.search(r'<tr data-key="mail".*?</tr>', page, re.S)
    assert row is not None
    assert '<td class="num" data-field="available">3</td>' in row.group(0)
    assert '<td class="num" data-field="scheduled">1</td>' in row.group(0)
    assert 'data-key="reports"' in page
    assert '<option selected value="">Every tenant</option>' in page

    narrowed = admin.get("/queues/?tenant=acme").get_data(as_text=True)
    row = re.search(r'<tr data-key="mail".*?</tr>', narrowed, re.S)
    assert row is not None and 'data-field="scheduled">0</td>' in row.group(0)
    assert 'data-live-figures="/metrics/figures.json?tenant=acme"' in narrowed
    assert admin.get("/queues/?tenant=nobody").status_code == 404


def test_an_hr_admin_sees_only_their_tenant_without_a_tenant_filter(
    app: Any, conn: Conn, people: dict[str, Any]
) -> None:
    make_job(conn, queue="mail", tenant_id=people["acme"])
    make_job(conn, queue="mail", tenant_id=people["globex"])
    client = client_for(app, people["acme_hr"])
    page = client.get("/queues/?tenant=globex").get_data(as_text=True)
    assert '<td class="num" data-field="available">1</td>' in page
    assert 'name="tenant"' not in page and "Workers</a>" not in page
    assert "Pause queue" not in client.get("/queues/mail").get_data(as_text=True)


def test_a_queue_page_counts_waiting_and_running_jobs_per_tenant(
    app: Any, admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    for _ in range(3):
        make_job(conn, queue="mail", tenant_id=people["acme"])
    make_job(conn, queue="mail", tenant_id=people["acme"], delay=600)  # scheduled: not waiting
    make_job(conn, queue="mail", tenant_id=people["globex"])
    make_job(conn, queue="mail", tenant_id=people["globex"])
    JobStore(conn).claim("mail", 1, "h:1:abc", 30)  # the oldest: one of acme's
    rows = re.findall(
        r'<tr><td>[^<]*<span class="muted">(\w+)</span></td><td class="num">(\d+)</td>'
        r'<td class="num">(\d+)</td></tr>',
        admin.get("/queues/mail").get_data(as_text=True),
    )
    assert rows == [("acme", "2", "1"), ("globex", "2", "0")]
    own = client_for(app, people["acme_hr"]).get("/queues/mail").get_data(as_text=True)
    assert "globex" not in own.split("data-queue-tenants")[1].split("</table>")[0]


def test_a_platform_admin_sets_a_rate_limit_that_the_pages_show_and_the_claim_obeys(
    app: Any, admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    waiting = make_job(conn, queue="mail", tenant_id=people["acme"])
    for _ in range(9):
        make_job(conn, queue="mail", tenant_id=people["acme"])
    register_worker(conn, queue="mail")
    assert "No rate limit." in admin.get("/queues/mail").get_data(as_text=True)
    answer = flashed(
        admin, post(admin, "/queues/mail/rate-limit", {"limit": "20", "period": "second"})
    )
    assert "Queue mail now starts at most 20 per second, from the next claim." in answer
    assert "At most <strong>20 per second</strong>, across every worker" in answer
    why = admin.get(f"/jobs/{waiting}").get_data(as_text=True)
    assert "rate limited: 20 per second" in why
    conn.execute(  # two tokens, and no time to refill: the claim takes two
        "UPDATE queues SET rate_tokens = 2, rate_refilled_at = clock_timestamp() + interval '1 s'"
    )
    assert len(JobStore(conn).claim("mail", 10, "h:1:abc", 30)) == 2
    refused = flashed(admin, post(admin, "/queues/mail/rate-limit", {"limit": "0"}))
    assert "The limit must be a whole number from 1 to 1,000,000, or empty." in refused
    cleared = flashed(
        admin, post(admin, "/queues/mail/rate-limit", {"limit": "", "period": "second"})
    )
    assert "Queue mail has no rate limit now" in cleared and "No rate limit." in cleared
    actions = [row[:3] for row in audit(conn)]
    assert actions == [("queue.rate_limit", "queue", "mail")] * 2
    assert [row[5]["limit"] for row in audit(conn)] == [20, None]
    hr = client_for(app, people["acme_hr"])
    assert hr.post("/queues/mail/rate-limit", data={"limit": "1"}).status_code in (
        302,
        303,
        400,
        403,
    )
    assert job_row(conn, waiting)["queue"] == "mail"
    assert scalar(conn, "SELECT rate_limit FROM queues WHERE name = 'mail'") is None


def test_a_queue_page_has_its_figures_graphs_and_a_window_choice(admin: Any, conn: Conn) -> None:
    make_job(conn, queue="mail")
    page = admin.get("/queues/mail?window=24h").get_data(as_text=True)
    for kind in ("throughput", "timing", "depth"):
        assert f'data-chart="{kind}"' in page
    assert 'data-source="/metrics/series.json?queue=mail&amp;window=24h"' in page
    assert 'aria-current="true">24h</a>' in page
    assert admin.get("/queues/nothing").status_code == 404
    assert admin.get("/queues/mail?window=2y").status_code == 404


def test_pausing_and_resuming_a_queue_is_recorded_and_refused_twice(
    admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    make_job(conn, queue="mail")
    page = flashed(admin, post(admin, "/queues/mail/pause"))
    assert "Queue mail paused" in page and "Resume queue" in page
    assert scalar(conn, "SELECT paused_by FROM queues WHERE name = 'mail'") == people["admin"].email
    assert "Queue mail is already paused." in flashed(admin, post(admin, "/queues/mail/pause"))
    assert "Queue mail resumed." in flashed(admin, post(admin, "/queues/mail/resume"))
    assert not scalar(conn, "SELECT paused FROM queues WHERE name = 'mail'")
    assert [row[:3] for row in audit(conn)] == [
        ("queue.pause", "queue", "mail"),
        ("queue.resume", "queue", "mail"),
    ]
    assert post(admin, "/queues/nothing/pause").status_code == 404


# -- jobs --------------------------------------------------------------------------------------


def test_the_job_list_filters_and_pages_by_keyset_newest_first(
    admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    ids = [make_job(conn, "noop", {"cycle_id": n % 3}, tenant_id=people["acme"]) for n in range(60)]
    dead = make_job(conn, "fail", {"cycle_id": 7}, state="dead", error="FailTaskError: 100% <b>",
                    queue="mail", tenant_id=people["globex"])  # fmt: skip
    first = admin.get("/jobs/").get_data(as_text=True)
    shown = [int(n) for n in re.findall(r'href="/jobs/(\d+)"', first)]
    assert shown == [dead, *reversed(ids)][:50]
    older = re.search(r'href="(/jobs/\?before=\d+)"', first)
    assert older is not None
    rest = [int(n) for n in re.findall(r'href="/jobs/(\d+)"', admin.get(older.group(1)).text)]
    assert rest == list(reversed(ids))[49:] and not set(rest) & set(shown)

    def found(query: str) -> list[int]:
        return [int(n) for n in re.findall(r'href="/jobs/(\d+)"', admin.get(query).text)]

    assert found("/jobs/?state=dead") == [dead]
    assert found("/jobs/?queue=mail&task=fail") == [dead]
    assert found("/jobs/?error=100%25") == [dead]  # a literal %, not a wildcard
    assert found("/jobs/?error=00_") == []  # a literal _, not a wildcard
    assert found("/jobs/?payload=cycle_id%3D7") == [dead]
    assert len(found("/jobs/?payload=cycle_id%3D1")) == 20
    assert found("/jobs/?tenant=globex") == [dead]
    assert found("/jobs/?state=available&tenant=globex") == []
    assert "Write the payload filter as key=value." in admin.get("/jobs/?payload=oops").text
    assert "FailTaskError: 100% &lt;b&gt;" in admin.get("/jobs/?state=dead").text


def test_a_job_page_escapes_the_payload_truncates_a_large_one_and_shows_every_attempt(
    admin: Any, conn: Conn
) -> None:
    payload = {"html": "<script>alert(1)</script>", "padding_after": "x" * 20_000}
    job_id = make_job(conn, "fail", payload, state="dead", attempt=2, max_attempts=2,
                      error="FailTaskError: <img src=x onerror=alert(2)>")  # fmt: skip
    add_attempt(conn, job_id, 1, error="ConnectionError: first", traceback="Traceback 1\n  <here>")
    add_attempt(conn, job_id, 2, error="FailTaskError: <img src=x onerror=alert(2)>")
    page = admin.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page and "<img" not in page
    assert "Showing the first 10,000 of 20,0" in page
    assert f'href="/jobs/{job_id}/payload"' in page
    assert "dead: attempt 2 of 2 failed and no attempt is left" in page
    assert "Traceback 1\n  &lt;here&gt;" in page and "ConnectionError: first" in page
    assert ">Requeue</button>" in page and ">Discard</button>" in page
    whole = admin.get(f"/jobs/{job_id}/payload")
    assert whole.mimetype == "text/plain" and whole.headers["X-Content-Type-Options"] == "nosniff"
    assert '"<script>alert(1)</script>"' in whole.get_data(as_text=True)
    assert len(whole.get_data(as_text=True)) > 20_000
    assert admin.get("/jobs/999999").status_code == 404


def test_a_job_page_links_each_attempt_to_its_trace(app: Any, admin: Any, conn: Conn) -> None:
    job_id = make_job(conn, "fail", state="dead", attempt=1)
    add_attempt(conn, job_id, 1, error="FailTaskError: boom")
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    conn.execute("UPDATE job_attempts SET trace_id = %s WHERE job_id = %s", (trace_id, job_id))
    assert f'<code title="{trace_id}">4bf92f35…</code>' in admin.get(f"/jobs/{job_id}").text
    app.config["PAUTA_TRACE_URL_TEMPLATE"] = "https://jaeger.example/trace/{trace_id}"
    page = admin.get(f"/jobs/{job_id}").text
    assert f'<a href="https://jaeger.example/trace/{trace_id}" rel="noopener">4bf92f35…</a>' in page


def test_a_job_page_says_why_a_job_waits(admin: Any, conn: Conn) -> None:
    def why(job_id: int) -> str:
        match = re.search(r'<p class="why" data-why>(.*?)</p>', admin.get(f"/jobs/{job_id}").text)
        assert match is not None
        return match.group(1)

    waiting = make_job(conn, queue="mail")
    assert why(waiting) == "waiting: no live worker serves this queue"
    register_worker(conn, queue="mail")
    assert why(waiting).startswith("waiting for a free worker since")
    JobStore(conn).pause_queue("mail", paused_by="ana@example.com")
    assert why(waiting).startswith("waiting: queue paused by ana@example.com since")
    scheduled = make_job(conn, queue="mail", delay=3600)
    assert re.match(r"scheduled for \d\d \w+ \d\d:\d\d:\d\d UTC \(in 5\d min \d+ s\); its queue "
                    r"is paused", why(scheduled))  # fmt: skip
    retrying = make_job(conn, queue="other", delay=90, attempt=3, error="X: y")
    assert why(retrying).startswith("backing off after attempt 3 of 5; next try at")
    running = make_job(conn, state="running", worker="host:9:beef00")
    assert why(running).startswith("running on host:9:beef00: attempt 1 of 5")


def test_requeue_gives_the_tasks_budget_records_it_and_refuses_what_does_not_apply(
    admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    dead = make_job(conn, "fail", state="dead", attempt=2, max_attempts=2, error="E: x",
                    tenant_id=people["acme"])  # fmt: skip
    page = flashed(admin, post(admin, f"/jobs/{dead}/requeue"))
    assert f"Job {dead} requeued with 5 more attempts." in page
    row = job_row(conn, dead)
    assert (row["state"], row["attempt"], row["max_attempts"]) == ("available", 2, 7)
    assert audit(conn) == [("job.requeue", "job", str(dead), people["acme"], 1,
                            {"task": "fail", "was": "dead", "attempt_budget": 5,
                             "job_ids": [dead]})]  # fmt: skip
    again = flashed(admin, post(admin, f"/jobs/{dead}/requeue"))
    assert f"Job {dead} is available; only dead or cancelled jobs can be requeued." in again
    assert len(audit(conn)) == 1
    assert post(admin, "/jobs/999999/requeue").status_code == 404


def test_requeue_is_refused_while_a_live_job_holds_the_unique_key(admin: Any, conn: Conn) -> None:
    dead = make_job(conn, state="dead", unique_key="digest:1", error="E: x")
    make_job(conn, unique_key="digest:1")
    page = flashed(admin, post(admin, f"/jobs/{dead}/requeue"))
    assert "cannot be requeued: a waiting or running job holds its unique key" in page
    assert job_row(conn, dead)["state"] == "dead" and audit(conn) == []


def test_an_action_and_its_audit_row_commit_together(
    admin: Any, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    import console.audit

    dead = make_job(conn, state="dead", error="E: x")
    real = console.audit.record

    def broken_record(*args: Any, **kwargs: Any) -> None:
        real(*args[:2], "not.an.action", *args[3:], **kwargs)  # violates audit_log_action_check

    monkeypatch.setattr(console.audit, "record", broken_record)
    with pytest.raises(IntegrityError):
        post(admin, f"/jobs/{dead}/requeue")
    assert job_row(conn, dead)["state"] == "dead"  # the requeue went with the audit row


def test_cancel_run_now_and_discard(admin: Any, conn: Conn) -> None:
    scheduled = make_job(conn, delay=3600)
    before = scalar(conn, "SELECT now()")
    page = flashed(admin, post(admin, f"/jobs/{scheduled}/run-now"))
    assert f"Job {scheduled} will run as soon as a worker is free." in page
    assert job_row(conn, scheduled)["available_at"] <= scalar(conn, "SELECT now()")
    assert job_row(conn, scheduled)["available_at"] >= before
    assert "is already waiting to run" in flashed(admin, post(admin, f"/jobs/{scheduled}/run-now"))
    assert "cancelled; it will not run" in flashed(admin, post(admin, f"/jobs/{scheduled}/cancel"))
    assert job_row(conn, scheduled)["state"] == "cancelled"
    dead = make_job(conn, state="dead", error="E: x")
    assert "discarded" in flashed(admin, post(admin, f"/jobs/{dead}/discard"))
    row = job_row(conn, dead)
    assert (row["state"], row["last_error"]) == ("cancelled", "E: x")
    refused = flashed(admin, post(admin, f"/jobs/{dead}/discard"))
    assert "only dead jobs can be discarded" in refused
    assert [row[0] for row in audit(conn)] == ["job.run_now", "job.cancel", "job.discard"]


def test_cancel_a_running_job_asks_it_to_stop_and_is_audited(admin: Any, conn: Conn) -> None:
    running = make_job(conn)
    [claimed] = JobStore(conn).claim("default", 1, "h:1:abc", 30)
    assert claimed.id == running
    page = admin.get(f"/jobs/{running}").get_data(as_text=True)
    assert f"/jobs/{running}/cancel" in page and "Ask it to stop" in page
    answer = flashed(admin, post(admin, f"/jobs/{running}/cancel"))
    assert f"Job {running} was asked to stop" in answer
    assert "cancel requested" in answer, "the job page says why it still runs"
    row = job_row(conn, running)
    assert (row["state"], row["cancel_requested_at"] is not None) == ("running", True)
    assert f"/jobs/{running}/cancel" not in answer, "asked once: no second button"
    [(action, target, target_id, _, _, details)] = audit(conn)
    assert (action, target, target_id) == ("job.cancel", "job", str(running))
    assert details["was"] == "running"
    JobStore(conn).finish([AttemptResult(claimed, "failed", "E: x", None, 1.0, 0.1)], "h:1:abc")
    assert job_row(conn, running)["state"] == "cancelled"
    refused = flashed(admin, post(admin, f"/jobs/{running}/cancel"))
    assert "only waiting, scheduled or running jobs can be cancelled" in refused


def test_scheduled_jobs_are_listed_soonest_first_and_run_now_comes_back_to_the_list(
    admin: Any, conn: Conn
) -> None:
    later = make_job(conn, delay=7200)
    sooner = make_job(conn, delay=60)
    retry = make_job(conn, delay=600, attempt=1, error="E: x")
    make_job(conn)  # visible now: not scheduled
    page = admin.get("/scheduled/").get_data(as_text=True)
    assert [int(n) for n in re.findall(r'<tr data-job="(\d+)"', page)] == [sooner, retry, later]
    assert "retry after attempt 1 of 5" in page
    token = csrf_token(admin, "/my/reviews")
    response = admin.post(f"/jobs/{later}/run-now", data={"csrf_token": token,
                                                           "next": "/scheduled/"})  # fmt: skip
    assert response.headers["Location"] == "/scheduled/"
    escaped = admin.post(f"/jobs/{sooner}/run-now", data={"csrf_token": token,
                                                          "next": "//evil.example/"})  # fmt: skip
    assert escaped.headers["Location"] == f"/jobs/{sooner}"


# -- failures ----------------------------------------------------------------------------------


def test_failures_are_grouped_by_fingerprint_and_a_group_is_requeued_up_to_what_was_shown(
    admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    timeouts = [
        make_job(conn, "fail", state="dead", error=f"TimeoutError: job {n} timed out after {n}.5s",
                 tenant_id=people["acme" if n % 2 else "globex"])
        for n in range(4)
    ]  # fmt: skip
    make_job(conn, "fail", state="dead", error="KeyError: 'user_id'")
    make_job(conn, "noop", state="dead", error="TimeoutError: job 9 timed out after 1.5s")
    page = admin.get("/failures/").get_data(as_text=True)
    groups = re.findall(r'<tr data-fingerprint="(\w+)">.*?<td class="num">(\d+)</td>', page, re.S)
    assert [count for _, count in groups] == ["4", "1", "1"]
    fingerprint = groups[0][0]

    confirm = admin.get(f"/failures/{fingerprint}/confirm?action=requeue").get_data(as_text=True)
    assert "Requeue 4 dead jobs?" in confirm and ">Requeue 4 jobs</button>" in confirm
    fence = re.search(r'name="max_id"[^>]*value="(\d+)"', confirm)
    assert fence is not None and int(fence.group(1)) == max(timeouts)
    late = make_job(conn, "fail", state="dead", error="TimeoutError: job 77 timed out after 2.5s")
    done = flashed(admin, post(admin, f"/failures/{fingerprint}/requeue", {"max_id": fence[1]}))
    assert "Requeued 4 dead fail jobs." in done
    assert {job_row(conn, job_id)["state"] for job_id in timeouts} == {"available"}
    assert job_row(conn, late)["state"] == "dead"  # died after the confirmation: left alone
    per_tenant = {row[3]: row[5]["job_ids"] for row in audit(conn)}
    assert per_tenant == {people["acme"]: timeouts[1::2], people["globex"]: timeouts[0::2]}


def test_a_selection_of_a_group_is_discarded_and_nothing_else(admin: Any, conn: Conn) -> None:
    jobs = [make_job(conn, "fail", state="dead", error=f"E: number {n}") for n in range(5)]
    fingerprint = scalar(
        conn, "SELECT md5(task || E'\\n' || job_error_pattern(last_error)) FROM jobs LIMIT 1"
    )
    detail = admin.get(f"/failures/{fingerprint}").get_data(as_text=True)
    assert detail.count('type="checkbox" name="job"') == 5
    chosen = jobs[1:3]
    query = "&".join(f"job={job_id}" for job_id in chosen)
    confirm = admin.get(f"/failures/{fingerprint}/confirm?action=discard&{query}").text
    assert "Discard 2 dead jobs?" in confirm
    data = {"max_id": max(jobs), "jobs": [str(job_id) for job_id in chosen]}
    assert "Discarded 2 dead fail jobs." in flashed(
        admin, post(admin, f"/failures/{fingerprint}/discard", data)
    )
    states = {job_id: job_row(conn, job_id)["state"] for job_id in jobs}
    assert [states[job_id] for job_id in jobs] == ["dead", "cancelled", "cancelled", "dead", "dead"]
    assert audit(conn)[0][5]["job_ids"] == chosen and audit(conn)[0][5]["selected"] is True
    assert admin.get("/failures/0123456789abcdef0123456789abcdef").status_code == 404
    assert admin.get(f"/failures/{fingerprint}/confirm?action=explode").status_code == 404


# -- workers and audit -------------------------------------------------------------------------


def test_workers_are_listed_with_their_children_and_asked_to_shut_down(
    admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    supervisor = register_worker(conn, queue=None, pid=100)
    child = register_worker(conn, queue="mail", parent_id=supervisor, pid=101)
    make_job(conn, state="running", worker="host:101:abc123")
    page = admin.get("/workers/").get_data(as_text=True)
    assert page.index(f'data-worker="{supervisor}"') < page.index(f'data-worker="{child}"')
    done = flashed(admin, post(admin, f"/workers/{supervisor}/drain"))
    assert "Asked host:100:supervisor to shut down gracefully (2 processes)." in done
    assert "1 draining, 1 job left" in done
    asked = conn.execute("SELECT drain_requested_by FROM workers ORDER BY id").fetchall()
    assert asked == [(people["admin"].email,)] * 2
    part = admin.get("/workers/?part=1").get_data(as_text=True)
    assert "<html" not in part and "data-worker-summary" in part
    lone = register_worker(conn, queue="reports", pid=102)
    assert "(1 process)" in flashed(admin, post(admin, "/workers/drain"))
    assert [row[2] for row in audit(conn)] == [str(supervisor), "all"]
    assert audit(conn)[1][5] == {"worker_ids": [lone]}


def test_the_audit_log_shows_each_tenant_only_its_own_entries(
    app: Any, admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    ours = make_job(conn, state="dead", tenant_id=people["acme"], error="E: x")
    theirs = make_job(conn, state="dead", tenant_id=people["globex"], error="E: x")
    make_job(conn, queue="mail")
    for path in (f"/jobs/{ours}/requeue", f"/jobs/{theirs}/requeue", "/queues/mail/pause"):
        post(admin, path)
    everything = admin.get("/audit/").get_data(as_text=True)
    assert f"job #{ours}" in everything and f"job #{theirs}" in everything
    assert "queue mail" in everything and people["admin"].email in everything
    hr = client_for(app, people["acme_hr"]).get("/audit/").get_data(as_text=True)
    assert f"job #{ours}" in hr and f"job #{theirs}" not in hr and "queue mail" not in hr


def test_the_console_sql_pages_by_keyset_never_by_offset() -> None:
    from jobqueue.queries import all_queries

    console = [query for name, query in all_queries().items() if name.startswith("console_")]
    assert len(console) >= 10
    assert not [query.name for query in console if re.search(r"\bOFFSET\b", query.sql, re.I)]


def test_an_enqueued_job_of_a_new_queue_appears_without_a_queue_row_first(
    admin: Any, conn: Conn
) -> None:
    enqueue(conn, "noop", queue="fresh")
    assert 'data-key="fresh"' in admin.get("/queues/").get_data(as_text=True)


def test_a_failure_group_page_acts_on_the_whole_group_or_on_the_jobs_ticked_only(
    admin: Any, conn: Conn
) -> None:
    jobs = [make_job(conn, "fail", state="dead", error=f"E: number {n}") for n in range(3)]
    fingerprint = scalar(
        conn, "SELECT md5(task || E'\\n' || job_error_pattern(last_error)) FROM jobs LIMIT 1"
    )
    detail = admin.get(f"/failures/{fingerprint}").text
    assert "3 dead jobs ·" in detail
    whole = f"/failures/{fingerprint}/confirm?action=requeue"
    assert f'href="{whole}">Requeue 3…</a>' in detail
    assert f'href="{whole.replace("requeue", "discard")}">Discard 3…</a>' in detail
    assert 'name="scope" value="selected"' in detail  # the "… selected" buttons say so

    nothing = admin.get(f"/failures/{fingerprint}/confirm?action=requeue&scope=selected").text
    assert "No job is ticked" in nothing and "<button" not in nothing.split("No job is ticked")[1]
    refused = flashed(admin, post(admin, f"/failures/{fingerprint}/requeue",
                                  {"max_id": max(jobs), "scope": "selected"}))  # fmt: skip
    assert "No job was ticked: nothing was changed." in refused
    assert {job_row(conn, job_id)["state"] for job_id in jobs} == {"dead"}

    one = admin.get(f"{whole}&scope=selected&job={jobs[0]}").text
    assert "Requeue 1 dead job?" in one and ">Requeue 1 job</button>" in one
    ticked = {"max_id": max(jobs), "scope": "selected", "jobs": [jobs[0]]}
    done = flashed(admin, post(admin, f"/failures/{fingerprint}/requeue", ticked))
    assert "Requeued 1 dead fail job." in done
    assert [job_row(conn, job_id)["state"] for job_id in jobs] == ["available", "dead", "dead"]
    assert "Requeue 2 dead jobs?" in admin.get(whole).text


def test_the_overview_flags_queues_with_work_and_no_live_worker_and_labels_its_rates(
    admin: Any, conn: Conn
) -> None:
    make_job(conn, queue="mail")
    make_job(conn, queue="reports", delay=3600)
    register_worker(conn, queue="mail")
    page = admin.get("/queues/").text
    rows = dict(re.findall(r'<tr data-key="(\w+)"(.*?)</tr>', page, re.S))
    assert 'data-field="state"></span>' in rows["mail"]  # served: no badge at all
    assert 'data-field="state">no live worker</span>' in rows["reports"]
    assert 'class=" is-unserved"' in page and ">running</span>" not in page
    assert re.search(r"No live worker serves <strong[^>]*>reports</strong>", page)
    assert "attempts a minute, last 5 min" in page
    assert "No live worker serves this queue" in admin.get("/queues/reports").text
    assert "No live worker serves this queue" not in admin.get("/queues/mail").text


def test_the_audit_log_reads_as_sentences_and_hides_the_operators_address_from_hr(
    app: Any, admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    dead = [make_job(conn, "fail", state="dead", tenant_id=people["acme"], error=f"E: {n}")
            for n in range(2)]  # fmt: skip
    fingerprint = scalar(
        conn, "SELECT md5(task || E'\\n' || job_error_pattern(last_error)) FROM jobs LIMIT 1"
    )
    post(admin, f"/failures/{fingerprint}/discard",
         {"max_id": max(dead), "scope": "selected", "jobs": [dead[0]]})  # fmt: skip
    page = admin.get("/audit/").text
    assert f"Discarded 1 dead fail job of a failure group (the jobs ticked): #{dead[0]}." in page
    assert "selected" not in page.split("<table", 1)[1] and "job_ids" not in page
    assert people["admin"].email in page
    hr = client_for(app, people["acme_hr"]).get("/audit/").text
    assert "Discarded 1 dead fail job" in hr and people["admin"].email not in hr


def test_an_hr_admin_sees_no_worker_name_pid_or_pausing_admin_on_job_and_queue_pages(
    app: Any, admin: Any, conn: Conn, people: dict[str, Any]
) -> None:
    worker = "web-1.internal:4242:9f2c1a"
    running = make_job(conn, queue="mail", state="running", tenant_id=people["acme"],
                       worker=worker)  # fmt: skip
    swept = f"LeaseExpired: worker {worker} stopped renewing its lease (crashed, killed or cut off)"
    dead = make_job(conn, queue="mail", state="dead", tenant_id=people["acme"], error=swept)
    add_attempt(conn, dead, 1, "lease_expired", error=swept, worker=worker)
    waiting = make_job(conn, queue="mail", tenant_id=people["acme"])
    post(admin, "/queues/mail/pause")
    email = people["admin"].email
    hr = client_for(app, people["acme_hr"])
    pages = {
        path: hr.get(path).text
        for path in (f"/jobs/{running}", f"/jobs/{dead}", f"/jobs/{waiting}", "/queues/mail",
                     "/jobs/", "/failures/")
    }  # fmt: skip
    fingerprint = re.search(r'href="/failures/(\w+)"', pages["/failures/"])
    assert fingerprint is not None
    pages["group"] = hr.get(f"/failures/{fingerprint.group(1)}").text
    leaks = {path: [word for word in ("web-", "internal", "4242", "9f2c1a", email) if word in page]
             for path, page in pages.items()}  # fmt: skip
    assert leaks == {path: [] for path in pages}
    assert "LeaseExpired: worker (a worker) stopped renewing" in pages[f"/jobs/{dead}"]
    assert "waiting: queue paused since" in pages[f"/jobs/{waiting}"]
    for path in (f"/jobs/{running}", f"/jobs/{dead}", f"/jobs/{waiting}", "/queues/mail"):
        seen = admin.get(path).text  # a platform admin sees them all
        assert worker in seen or email in seen, path


def test_a_search_that_no_index_serves_is_bounded_and_the_page_says_so(
    admin: Any, conn: Conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "WINDOW", 10)
    old = make_job(conn, "fail", {"n": 1}, state="dead", error="GremlinError: old")
    for _ in range(15):
        make_job(conn, "noop", state="succeeded")
    new = make_job(conn, "fail", {"n": 1}, state="dead", error="GremlinError: new")
    indexed = admin.get("/jobs/?error=gremlin").text
    assert f">#{new}</a>" in indexed and f">#{old}</a>" in indexed
    assert "data-search-bound" not in indexed

    conn.execute("DROP INDEX jobs_error_search_idx")  # as on a server without pg_trgm
    for query in ("error=gremlin", "payload=n%3D1"):
        page = admin.get(f"/jobs/?{query}").text
        assert f">#{new}</a>" in page and f">#{old}</a>" not in page
        assert f"this page searched jobs #{new - 9} to #{new}." in page
        more = re.search(r'href="([^"]+)">Search the 10 jobs before', page)
        assert more is not None
        older = admin.get(more.group(1).replace("&amp;", "&")).text
        assert f">#{old}</a>" in older and f">#{new}</a>" not in older
    assert "pg_trgm" in admin.get("/jobs/?error=gremlin").text
    assert "The payload is not indexed" in admin.get("/jobs/?payload=n%3D1").text
    short = admin.get("/jobs/?error=gr").text
    assert "Search for 3 to 200 characters of the error." in short
