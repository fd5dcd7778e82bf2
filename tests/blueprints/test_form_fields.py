"""Every form field is rendered by one macro: its hint and error are tied to it for screen
readers, and an attribute without a value is left out, never written as "None"."""

import re
from typing import Any

from models.people import Role
from tests.support.factories import (
    login_as,
    make_cycle,
    make_employees,
    make_tenant,
    make_user,
    seeding,
    system_tenant,
)

NONE_VALUE = re.compile(r'\s[\w-]+="None"')


def test_no_form_field_carries_an_attribute_that_says_none(app: Any) -> None:
    with seeding(app) as session:
        tenant = make_tenant(session, "acme")
        people = make_employees(session, tenant, 4)
        hr_admin = make_user(session, tenant, Role.HR_ADMIN, employee=people[0])
        admin = make_user(session, system_tenant(session), Role.PLATFORM_ADMIN)
        cycle = make_cycle(session, tenant, people, activate_as=hr_admin)
    anonymous = app.test_client()
    pages = {"/login": anonymous.get("/login").text}
    hr = app.test_client()
    login_as(hr, hr_admin)
    review = re.search(r'href="(/my/reviews/\d+)"', hr.get(f"/my/reviews?cycle={cycle.id}").text)
    assert review is not None
    for path in ("/cycles/new", f"/cycles/{cycle.id}/edit", review.group(1)):
        pages[path] = hr.get(path).text
    console = app.test_client()
    login_as(console, admin)
    pages["/jobs/"] = console.get("/jobs/").text
    pages["/jobs/?payload=nokey"] = console.get("/jobs/?payload=nokey").text
    assert all("<input" in page for page in pages.values())
    assert {path: NONE_VALUE.findall(page) for path, page in pages.items()} == {
        path: [] for path in pages
    }
    assert '<input aria-describedby="payload-hint" id="payload"' in pages["/jobs/"]
    invalid = pages["/jobs/?payload=nokey"]
    assert 'aria-describedby="payload-hint payload-error" aria-invalid="true"' in invalid
    assert '<input id="queue" maxlength="63" name="queue" type="text" value="">' in invalid
