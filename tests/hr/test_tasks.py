"""The notification task's registration: name, queue, retry policy, and no Flask in the worker."""

import subprocess
import sys
from typing import Any

from hr.notices import REVIEWER_PAGE
from hr.tasks import (
    IMPORT_EMPLOYEES,
    IMPORT_RETRY,
    IMPORTS_QUEUE,
    MAIL_RETRY,
    NOTIFICATIONS_QUEUE,
    NOTIFY_REVIEWER,
)
from jobqueue import registry
from models.cycles import NOTIFY_REVIEWER_TASK
from tests.support.processes import ROOT


def test_the_task_name_is_the_one_the_dedup_index_names() -> None:
    assert NOTIFY_REVIEWER == NOTIFY_REVIEWER_TASK


def test_the_task_runs_on_the_notifications_queue_with_five_attempts_capped_at_five_minutes() -> (
    None
):
    registered = registry.require(NOTIFY_REVIEWER)
    assert (registered.queue, registered.pass_context) == (NOTIFICATIONS_QUEUE, True)
    assert registered.retry == MAIL_RETRY
    assert (MAIL_RETRY.max_attempts, MAIL_RETRY.base_seconds, MAIL_RETRY.cap_seconds) == (
        5, 10.0, 300.0,
    )  # fmt: skip
    assert [MAIL_RETRY.ceiling(n) for n in range(1, 7)] == [10, 20, 40, 80, 160, 300]


def python(code: str, **env: str) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )  # fmt: skip
    return result.stdout.strip()


def test_the_worker_side_imports_no_flask() -> None:
    loaded = python("import sys, hr.tasks; print(sorted(m for m in sys.modules if 'flask' in m))")
    assert loaded == "[]"


def test_the_retry_base_comes_from_the_environment_once_at_import() -> None:
    base = python(
        "import hr.tasks; print(hr.tasks.MAIL_RETRY.base_seconds)",
        PAUTA_MAIL_RETRY_BASE_SECONDS="0.5",
    )
    assert base == "0.5"


def test_the_link_in_the_email_is_the_reviewer_page(app: Any) -> None:
    with app.test_request_context():
        from flask import url_for

        assert REVIEWER_PAGE.format(cycle_id=7) == url_for("cycles.my_reviews", cycle=7)


def test_the_import_task_runs_on_the_default_queue_with_three_attempts() -> None:
    registered = registry.require(IMPORT_EMPLOYEES)
    assert (registered.queue, registered.pass_context, registered.retry) == (
        IMPORTS_QUEUE, True, IMPORT_RETRY,
    )  # fmt: skip
    assert (IMPORTS_QUEUE, IMPORT_RETRY.max_attempts) == ("default", 3)
