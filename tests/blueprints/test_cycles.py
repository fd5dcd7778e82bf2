"""The cycle pages as HR staff, HR admins and employees use them, CSRF on."""

import re
from typing import Any

import psycopg
import pytest
from werkzeug.datastructures import MultiDict

from hr.cycles import close_cycle
from models.people import Role
from tests.support.db import scalar
from tests.support.factories import (
    csrf_token,
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    post_form,
    seeding,
)

Conn = psycopg.Connection[Any]
CONFIRMED = {"confirmed": "1"}  # what the page's dialog adds once answered


@pytest.fixture
def people(app: Any) -> dict[str, Any]:
    """A tenant of 31 employees (spans of 5), an HR staff, an HR admin, and an employee user."""
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        employees = make_employees(session, tenant, 31)
        return {
            "tenant": tenant,
            "employees": employees,
            Role.HR_STAFF: make_user(session, tenant, Role.HR_STAFF),
            Role.HR_ADMIN: make_user(session, tenant, Role.HR_ADMIN),
            Role.EMPLOYEE: make_user(session, tenant, Role.EMPLOYEE, employee=employees[6]),
        }


def logged_in(app: Any, user: Any) -> Any:
    client = app.test_client()
    login_as(client, user)
    return client


def ticked(page: str) -> set[int]:
    """The employee ids whose participant checkbox is ticked."""
    return {
        int(v) for v in re.findall(r'<input checked[^>]*name="employees"[^>]*value="(\d+)"', page)
    }


def test_hr_staff_prepare_a_cycle_from_draft_to_reviews(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    client = logged_in(app, people[Role.HR_STAFF])
    invalid = post_form(client, "/cycles/new", {"name": "", "period_start": "2026-06-30",
                        "period_end": "2026-01-01", "due_date": "2026-07-15"},
                        token_from="/cycles/new")  # fmt: skip
    page = invalid.get_data(as_text=True)
    assert invalid.status_code == 200
    assert 'id="name-error">This field is required.' in page
    assert 'id="period_end-error">The period must end on or after its first day.' in page
    assert 'aria-invalid="true"' in page and scalar(conn, "SELECT count(*) FROM review_cycles") == 0

    created = post_form(client, "/cycles/new", {"name": "2026 H1", "period_start": "2026-01-01",
                        "period_end": "2026-06-30", "due_date": "2026-07-15"},
                        token_from="/cycles/new")  # fmt: skip
    cycle_id = scalar(conn, "SELECT id FROM review_cycles WHERE name = '2026 H1'")
    assert created.headers["Location"] == f"/cycles/{cycle_id}/participants"

    edited = post_form(client, f"/cycles/{cycle_id}/edit", {"name": "2026 first half",
                       "period_start": "2026-01-01", "period_end": "2026-06-30",
                       "due_date": "2026-07-31"}, token_from="/cycles/new")  # fmt: skip
    assert edited.status_code == 303
    assert scalar(conn, "SELECT due_date::text FROM review_cycles") == "2026-07-31"

    # Filter to the reports of the second person (in the demo tree, employees 6 to 10), add
    # them all, then untick one.
    manager = people["employees"][1]
    path = f"/cycles/{cycle_id}/participants?manager={manager.id}"
    page = client.get(path).get_data(as_text=True)
    shown = re.search(r'name="shown" type="hidden" value="([\d,]+)"', page).group(1)  # type: ignore[union-attr]
    reports = {e.id for e in people["employees"] if e.manager_id == manager.id}
    assert reports == {int(i) for i in shown.split(",")}
    added = post_form(client, path, {"shown": shown, "add_all": "Add everyone shown"},
                      token_from=path)  # fmt: skip
    assert added.status_code == 302
    assert scalar(conn, "SELECT count(*) FROM cycle_participants") == len(shown.split(","))
    keep = [int(i) for i in shown.split(",")][1:]
    post_form(client, path, {"shown": shown, "employees": keep, "save": "Save selection"},
              token_from=path)  # fmt: skip
    assert scalar(conn, "SELECT count(*) FROM cycle_participants") == len(keep)
    assert ticked(client.get(path).get_data(as_text=True)) == set(keep)

    by_department = client.get(f"/cycles/{cycle_id}/participants?department=Sales")
    assert "Chiara Costa" in by_department.get_data(as_text=True)  # Sales head (demo tree)

    generated = post_form(client, f"/cycles/{cycle_id}/reviews", {"peers": "1"},
                          token_from=f"/cycles/{cycle_id}/reviews")  # fmt: skip
    assert generated.status_code == 303
    assert scalar(conn, "SELECT count(*) FROM reviews WHERE kind = 'peer'") == len(keep)
    detail = client.get(f"/cycles/{cycle_id}").get_data(as_text=True)
    assert "an HR administrator activates it" in detail
    assert "Activate the cycle" not in detail


def test_hr_admin_activates_once_then_gets_a_clear_refusal(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    with seeding(app) as session:
        cycle = make_cycle(session, people["tenant"], people["employees"][:8], name="Q3 <check>")
    client = logged_in(app, people[Role.HR_ADMIN])
    detail = f"/cycles/{cycle.id}"
    assert "Activate the cycle" in client.get(detail).get_data(as_text=True)

    first = post_form(client, f"{detail}/activate", CONFIRMED, token_from=detail,
                      follow_redirects=True)  # fmt: skip
    page = first.get_data(as_text=True)
    assert "“Q3 &lt;check&gt;” is active: 15 reviews are open and 8 reviewers" in page
    assert page.count(">queued</a>") == 8

    again = post_form(client, f"{detail}/activate", CONFIRMED, token_from=detail,
                      follow_redirects=True)  # fmt: skip
    assert "cannot be activated: it is active, not draft. Nothing was changed." in (
        again.get_data(as_text=True)
    )
    as_json = post_form(client, f"{detail}/activate", token_from=detail,
                        headers={"Accept": "application/json"})  # fmt: skip
    assert as_json.status_code == 409
    assert as_json.get_json()["error"].startswith("“Q3 <check>” cannot be activated")
    assert scalar(conn, "SELECT count(*) FROM jobs WHERE task = 'hr.notify_reviewer'") == 8

    closed = post_form(client, f"{detail}/close", CONFIRMED, token_from=detail,
                       follow_redirects=True)  # fmt: skip
    assert "is closed; no more reviews can be submitted" in closed.get_data(as_text=True)
    assert scalar(conn, "SELECT status FROM review_cycles") == "closed"


def test_hr_admin_cancels_a_draft_but_cannot_edit_it_afterwards(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    with seeding(app) as session:
        cycle = make_cycle(session, people["tenant"], people["employees"][:3])
    client = logged_in(app, people[Role.HR_ADMIN])
    detail = f"/cycles/{cycle.id}"
    post_form(client, f"{detail}/cancel", CONFIRMED, token_from=detail)
    assert scalar(conn, "SELECT status FROM review_cycles") == "cancelled"
    edit = client.get(f"{detail}/edit").get_data(as_text=True)
    assert "This cycle is cancelled: its details can no longer change." in edit
    refused = post_form(client, f"{detail}/edit", {"name": "x", "period_start": "2026-01-01",
                        "period_end": "2026-01-02", "due_date": "2026-01-02"},
                        token_from=detail, follow_redirects=True)  # fmt: skip
    assert "cannot be edited: it is cancelled" in refused.get_data(as_text=True)


def test_an_employee_writes_their_reviews_and_only_theirs(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    employees = people["employees"]
    with seeding(app) as session:
        make_cycle(session, people["tenant"], employees[:8], name="Still a draft")
        cycle = make_cycle(session, people["tenant"], employees[:8], name="Open now",
                           activate_as=people[Role.HR_ADMIN])  # fmt: skip
    me = employees[6]
    client = logged_in(app, people[Role.EMPLOYEE])
    page = client.get("/my/reviews").get_data(as_text=True)
    assert "Open now" in page and "Still a draft" not in page
    mine = scalar(conn, "SELECT id FROM reviews WHERE cycle_id = %s AND reviewer_id = %s"
                        " AND kind = 'self'", cycle.id, me.id)  # fmt: skip
    theirs = scalar(conn, "SELECT min(id) FROM reviews WHERE cycle_id = %s AND reviewer_id <> %s",
                    cycle.id, me.id)  # fmt: skip
    assert client.get(f"/my/reviews/{theirs}").status_code == 404

    form = f"/my/reviews/{mine}"
    assert "Your self-review" in client.get(form).get_data(as_text=True)
    missing = post_form(client, form, {"comments": ""}, token_from=form)
    page = missing.get_data(as_text=True)
    assert 'id="rating-error">Choose a rating.' in page
    assert 'id="comments-error">This field is required.' in page
    done = post_form(client, form, {"rating": "4", "comments": "A good half <year>."},
                     token_from=form)  # fmt: skip
    assert done.headers["Location"] == f"/my/reviews?cycle={cycle.id}"
    assert scalar(conn, "SELECT status || rating FROM reviews WHERE id = %s", mine) == "submitted4"
    shown = client.get(form).get_data(as_text=True)
    assert "A good half &lt;year&gt;." in shown and "Submit review" not in shown
    listing = client.get(f"/my/reviews?cycle={cycle.id}").get_data(as_text=True)
    assert "1 of 1 submitted" in listing


def test_hr_users_without_an_employee_record_are_told_so(app: Any, people: dict[str, Any]) -> None:
    client = logged_in(app, people[Role.HR_STAFF])
    assert "not linked to an employee record" in client.get("/my/reviews").get_data(as_text=True)


def test_a_cycle_name_with_a_line_break_is_refused_in_the_form(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    client = logged_in(app, people[Role.HR_STAFF])
    for name in ("H1\r\nBcc: all@acme.example", "H1\nH2", "H1\u2028H2"):
        answer = post_form(client, "/cycles/new", {"name": name, "period_start": "2026-01-01",
                           "period_end": "2026-06-30", "due_date": "2026-07-15"},
                           token_from="/cycles/new")  # fmt: skip
        assert answer.status_code == 200
        assert (
            'id="name-error">The name must be one line, without line breaks or control characters.'
            in answer.get_data(as_text=True)
        )
    assert scalar(conn, "SELECT count(*) FROM review_cycles") == 0


def test_a_refused_submission_lands_on_my_reviews_with_the_reason(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    employees = people["employees"]
    with seeding(app) as session:
        cycle = make_cycle(session, people["tenant"], employees[:8], name="Open now", peers=1,
                           activate_as=people[Role.HR_ADMIN])  # fmt: skip
    me = employees[6]  # writes a self-review and a peer review
    mine = scalar(conn, "SELECT array_agg(id ORDER BY id) FROM reviews WHERE cycle_id = %s"
                        " AND reviewer_id = %s", cycle.id, me.id)  # fmt: skip
    client = logged_in(app, people[Role.EMPLOYEE])
    form = f"/my/reviews/{mine[0]}"
    token = csrf_token(client, form)  # the form as it was before submitting
    post_form(client, form, {"rating": "4", "comments": "First."}, token_from=form)

    again = client.post(form, data={"rating": "1", "comments": "Again.", "csrf_token": token})
    assert (again.status_code, again.headers["Location"]) == (303, "/my/reviews")
    page = client.get("/my/reviews")
    assert page.status_code == 200
    assert "this review was already submitted" in page.get_data(as_text=True)
    assert scalar(conn, "SELECT rating || comments FROM reviews WHERE id = %s", mine[0]) == (
        "4First."
    )

    with seeding(app) as session:
        close_cycle(session, people["tenant"].id, cycle.id)
    late = post_form(client, f"/my/reviews/{mine[1]}", {"rating": "3", "comments": "Late."},
                     token_from=form, follow_redirects=True)  # fmt: skip
    assert late.status_code == 200 and late.request.path == "/my/reviews"
    assert "“Open now” is closed: reviews can no longer be submitted" in late.get_data(as_text=True)
    assert scalar(conn, "SELECT status FROM reviews WHERE id = %s", mine[1]) == "open"


def steps(page: str) -> tuple[list[str], list[str]]:
    """(every step shown, the steps marked current) of the page's step pills."""
    pills = re.search(r'<ol class="steps".*?</ol>', page, re.DOTALL)
    assert pills, "no step pills on the page"
    shown = re.findall(r">(\d\. \w+)</(?:a|span)>", pills.group(0))
    return shown, re.findall(r'aria-current="step">([^<]+)<', pills.group(0))


def test_the_step_pills_mark_the_page_and_offer_activation_to_hr_admins_only(
    app: Any, people: dict[str, Any]
) -> None:
    with seeding(app) as session:
        cycle = make_cycle(session, people["tenant"], people["employees"][:4])
    everything = ["1. Details", "2. Participants", "3. Reviews", "4. Activate"]
    pages = {
        "/cycles/new": "1. Details",
        f"/cycles/{cycle.id}/edit": "1. Details",
        f"/cycles/{cycle.id}/participants": "2. Participants",
        f"/cycles/{cycle.id}/reviews": "3. Reviews",
    }
    admin = logged_in(app, people[Role.HR_ADMIN])
    for path, current in {**pages, f"/cycles/{cycle.id}": "4. Activate"}.items():
        shown, marked = steps(admin.get(path).get_data(as_text=True))
        assert (shown, marked) == (everything, [current]), path
    staff = logged_in(app, people[Role.HR_STAFF])
    for path, current in pages.items():
        shown, marked = steps(staff.get(path).get_data(as_text=True))
        assert "4. Activate" not in shown and marked == [current], path
    assert steps(staff.get(f"/cycles/{cycle.id}").get_data(as_text=True)) == (everything[:3], [])


def hidden_fields(page: str) -> list[tuple[str, str]]:
    """The hidden inputs of the page's forms, as a browser would post them."""
    return re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page)


def test_a_participant_change_that_drops_reviews_asks_first_and_keeps_the_rest(
    app: Any, people: dict[str, Any], conn: Conn
) -> None:
    employees = people["employees"]
    with seeding(app) as session:
        cycle = make_cycle(session, people["tenant"], employees[:6])  # 0 manages 1 to 5
    reviews = "SELECT string_agg(id || kind, ',' ORDER BY id) FROM reviews"
    before = scalar(conn, reviews)
    client = logged_in(app, people[Role.HR_STAFF])
    path = f"/cycles/{cycle.id}/participants"
    page = client.get(path).get_data(as_text=True)
    assert "This draft has 11 generated reviews." in page
    shown = re.search(r'name="shown" type="hidden" value="([\d,]+)"', page).group(1)  # type: ignore[union-attr]
    keep = [e.id for e in employees[:6] if e.id != employees[5].id]

    asked = post_form(client, path, {"shown": shown, "employees": keep, "save": "Save selection"},
                      token_from=path)  # fmt: skip
    page = asked.get_data(as_text=True)
    assert asked.status_code == 200
    assert "Drop 2 generated reviews?" in page
    assert "drops 2 generated reviews that no longer apply; the other 9 stay." in page
    assert scalar(conn, reviews) == before
    assert scalar(conn, "SELECT count(*) FROM cycle_participants") == 6

    confirmed = client.post(path, data=MultiDict(hidden_fields(page)))
    assert confirmed.status_code == 302
    assert scalar(conn, "SELECT count(*) FROM cycle_participants") == 5
    assert scalar(conn, "SELECT count(*) FROM reviews WHERE reviewee_id = %s", employees[5].id) == 0
    assert set(scalar(conn, reviews).split(",")) < set(before.split(","))  # same ids, 2 fewer
    assert len(scalar(conn, reviews).split(",")) == 9
    flashed = client.get(path).get_data(as_text=True)
    assert "0 participants added, 1 removed. Generated reviews: 9 kept, 2 dropped, 0 added." in (
        flashed
    )
