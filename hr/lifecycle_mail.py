"""The lifecycle's e-mails: a reviewer's reminder and an HR admin's calibration escalation.

Plain text, built without Flask. Each carries a Message-ID that is the same on every attempt,
so a mail sent twice (delivery is at least once) is recognisable as one message.
"""

from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import formataddr, formatdate, parseaddr
from typing import Any

import psycopg

from hr.mail import MailSettings, check_address
from jobqueue import PermanentError

CYCLE_PAGE = "/cycles/{cycle_id}"
REVIEWER_PAGE = "/my/reviews?cycle={cycle_id}"


def _domain(settings: MailSettings) -> str:
    return Address(addr_spec=parseaddr(settings.sender)[1] or "pauta@localhost").domain


def reminder(
    connection: psycopg.Connection[Any], settings: MailSettings, tenant_id: int, cycle_id: int,
    reviewer_id: int, round_number: int,
) -> EmailMessage | None:  # fmt: skip
    """The reminder for a reviewer's open reviews; None when none is open any more."""
    row = connection.execute(
        "SELECT c.name, c.due_date, e.name, e.email, count(*)"
        " FROM reviews r JOIN review_cycles c ON c.id = r.cycle_id AND c.tenant_id = r.tenant_id"
        " JOIN employees e ON e.id = r.reviewer_id AND e.tenant_id = r.tenant_id"
        " WHERE r.tenant_id = %s AND r.cycle_id = %s AND r.reviewer_id = %s"
        " AND r.status = 'open' GROUP BY c.id, e.id",
        (tenant_id, cycle_id, reviewer_id),
    ).fetchone()
    if row is None:
        return None
    cycle_name, due_date, name, email, open_reviews = row
    message = EmailMessage()
    message["Subject"] = f"Reminder: {open_reviews} review(s) due {due_date:%d %b %Y}: {cycle_name}"
    message["From"] = settings.sender
    message["To"] = formataddr((name, check_address(email)))
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = (
        f"<review-reminder.{tenant_id}.{cycle_id}.{reviewer_id}.{round_number}@{_domain(settings)}>"
    )
    link = settings.base_url + REVIEWER_PAGE.format(cycle_id=cycle_id)
    message.set_content(
        f"Hello {name},\n\nYou still have {open_reviews} open review(s) in “{cycle_name}”, "
        f"due {due_date:%A %d %B %Y}.\n\nWrite them here: {link}\n"
    )
    return message


def escalation(
    connection: psycopg.Connection[Any], settings: MailSettings, tenant_id: int, cycle_id: int,
    user_id: int, round_number: int,
) -> EmailMessage:  # fmt: skip
    """The e-mail telling an HR admin that the cycle's calibration is overdue."""
    row = connection.execute(
        "SELECT c.name, u.email FROM review_cycles c JOIN users u ON u.tenant_id = c.tenant_id"
        " WHERE c.tenant_id = %s AND c.id = %s AND u.id = %s",
        (tenant_id, cycle_id, user_id),
    ).fetchone()
    if row is None:
        raise PermanentError(f"no cycle {cycle_id} or user {user_id} in tenant {tenant_id}")
    cycle_name, email = row
    message = EmailMessage()
    message["Subject"] = f"Calibration overdue: {cycle_name}"
    message["From"] = settings.sender
    message["To"] = check_address(email)
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = (
        f"<calibration-escalation.{tenant_id}.{cycle_id}.{user_id}.{round_number}"
        f"@{_domain(settings)}>"
    )
    link = settings.base_url + CYCLE_PAGE.format(cycle_id=cycle_id)
    message.set_content(
        f"The calibration of “{cycle_name}” is waiting for an HR admin's approval "
        f"(reminder {round_number}).\n\nApprove it or send it back here: {link}\n"
    )
    return message
