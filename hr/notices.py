"""The e-mail telling a reviewer that their reviews of a cycle are open: its data and its text.

Read with the worker's psycopg connection, rendered with Jinja2 (plain text and HTML), both
without Flask: the worker does not import the web application. Written in the reviewer's
language: the one they chose on their profile (the user linked to their employee record), else
their tenant's default; the subject and the due date too (hr.i18n).
"""

from dataclasses import dataclass
from datetime import date
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formataddr, formatdate, parseaddr
from typing import Any

import psycopg
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from psycopg.rows import dict_row

from hr.i18n import format_day, gettext, speaking, translate, translate_plural
from hr.mail import MailSettings, check_address
from hr.wording import review_label
from jobqueue import PermanentError

# The reviewer's page in the web app (blueprints/cycles: my_reviews); a test holds them equal.
REVIEWER_PAGE = "/my/reviews?cycle={cycle_id}"

_templates = Environment(
    loader=PackageLoader("hr", "mail_templates"),
    autoescape=select_autoescape(["html"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    extensions=["jinja2.ext.i18n"],
)
_templates.install_gettext_callables(  # type: ignore[attr-defined]
    translate, translate_plural, newstyle=True
)

NOTICE_QUERY = """
SELECT c.id AS cycle_id, c.name AS cycle_name, c.status AS cycle_status, c.due_date,
       t.name AS organisation, e.id AS reviewer_id, e.name AS reviewer_name,
       e.email AS reviewer_email,
       coalesce((SELECT u.language FROM users u
                 WHERE u.tenant_id = c.tenant_id AND u.employee_id = e.id
                   AND u.language IS NOT NULL
                 ORDER BY u.id LIMIT 1), t.default_locale) AS language,
       array_agg(r.kind ORDER BY r.kind <> 'self', reviewee.name) AS kinds,
       array_agg(reviewee.name ORDER BY r.kind <> 'self', reviewee.name) AS reviewees
FROM review_cycles c
JOIN tenants t ON t.id = c.tenant_id
JOIN reviews r ON r.cycle_id = c.id AND r.tenant_id = c.tenant_id
JOIN employees e ON e.id = r.reviewer_id AND e.tenant_id = c.tenant_id
JOIN employees reviewee ON reviewee.id = r.reviewee_id AND reviewee.tenant_id = c.tenant_id
WHERE c.tenant_id = %(tenant_id)s AND c.id = %(cycle_id)s AND r.reviewer_id = %(reviewer_id)s
GROUP BY c.id, t.name, t.default_locale, e.id
"""


@dataclass(frozen=True, slots=True)
class ReviewerNotice:
    cycle_id: int
    cycle_name: str
    cycle_status: str
    due_date: date
    organisation: str
    reviewer_id: int
    reviewer_name: str
    reviewer_email: str
    reviews: list[str]  # hr.wording.review_label of each, the self-review first
    language: str = "en"  # the reviewer's: pt_BR or en


def load_notice(
    connection: psycopg.Connection[Any], tenant_id: int, cycle_id: int, reviewer_id: int
) -> ReviewerNotice | None:
    """What the reviewer's e-mail says, or None if they have no review in that cycle."""
    with connection.cursor(row_factory=dict_row) as cursor:
        cursor.execute(
            NOTICE_QUERY,
            {"tenant_id": tenant_id, "cycle_id": cycle_id, "reviewer_id": reviewer_id},
        )
        row = cursor.fetchone()
    if row is None:
        return None
    with speaking(row["language"]):
        labels = list(map(review_label, row.pop("kinds"), row.pop("reviewees")))
    return ReviewerNotice(**row, reviews=labels)


def record_start(
    connection: psycopg.Connection[Any], tenant_id: int, notice: ReviewerNotice, job_id: int,
    attempt: int,
) -> None:  # fmt: skip
    """Say that a worker thread has begun this attempt: the cycle page shows it "sending"."""
    connection.execute(
        "INSERT INTO review_notice_starts (job_id, tenant_id, cycle_id, reviewer_id, attempt)"
        " VALUES (%s, %s, %s, %s, %s)"
        " ON CONFLICT (job_id) DO UPDATE SET attempt = excluded.attempt, started_at = now()",
        (job_id, tenant_id, notice.cycle_id, notice.reviewer_id, attempt),
    )


class UnrenderableNotice(PermanentError):
    """The notice cannot be made into an e-mail (a header that cannot hold the cycle's name,
    say): rendering is deterministic, so no retry could succeed."""


def render_notice(notice: ReviewerNotice, settings: MailSettings, tenant_id: int) -> EmailMessage:
    """The e-mail, plain text with an HTML alternative, addressed to the reviewer; raises
    PermanentError when it cannot be made."""
    recipient = check_address(notice.reviewer_email)
    try:
        return _render(notice, settings, tenant_id, recipient)
    except Exception as error:  # pure code on stored data: what fails once fails every time
        raise UnrenderableNotice(f"the notice cannot be rendered: {error}") from error


def _render(
    notice: ReviewerNotice, settings: MailSettings, tenant_id: int, recipient: str
) -> EmailMessage:
    with speaking(notice.language):
        return _render_in_language(notice, settings, tenant_id, recipient)


def _render_in_language(
    notice: ReviewerNotice, settings: MailSettings, tenant_id: int, recipient: str
) -> EmailMessage:
    context = {
        "notice": notice,
        "link": settings.base_url + REVIEWER_PAGE.format(cycle_id=notice.cycle_id),
        "due": format_day(notice.due_date, long=True),
        "language": notice.language,
    }
    message = EmailMessage()
    message["Subject"] = gettext(
        "Reviews due %(due)s: %(cycle)s",
        due=format_day(notice.due_date),
        cycle=notice.cycle_name,
    )
    message["From"] = settings.sender
    message["To"] = formataddr((notice.reviewer_name, recipient))
    message["Date"] = formatdate(usegmt=True)
    # The same id on every attempt: a mail sent twice (delivery is at least once) is recognisable
    # as one message by the receiving side.
    domain = Address(addr_spec=parseaddr(settings.sender)[1] or "pauta@localhost").domain
    message["Message-ID"] = (
        f"<review-notice.{tenant_id}.{notice.cycle_id}.{notice.reviewer_id}@{domain}>"
    )
    message.set_content(_templates.get_template("reviewer_notice.txt").render(context))
    message.add_alternative(
        _templates.get_template("reviewer_notice.html").render(context), subtype="html"
    )
    return message
