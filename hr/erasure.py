"""Erasing a person who left (LGPD art. 16, 18): one transaction that leaves no personal data of
theirs in the database, while the closed cycles' statistics still add up.

Refused while the person takes part in an active cycle (their reviews are open). Otherwise:

1. their draft cycles forget them (participation and pending reviews deleted: nothing was
   asked of anyone yet), and the exports of their data are deleted;
2. the comments of every review they wrote or received are emptied, and those reviews no longer
   point at them (``reviewer_id`` / ``reviewee_id`` NULL): the ratings stay, unlinked;
3. their ``employees`` row becomes a pseudonym (``Erased person 42``,
   ``erased-42@erased.invalid``, no department): the manager tree and the participant counts
   still hold;
4. their user accounts are deleted; what those accounts did stays in the audit log, by "an
   erased account" (``user_id`` NULL), as do the cycles they activated and the imports they ran;
5. their name and addresses are replaced by ``[erased]`` in the tenant's job errors, attempt
   errors and tracebacks, audit details, stored import files and import reports; their log-in
   throttle counter is deleted;
6. the audit log records the erasure: who did it, when, and the pseudonym, without the data.

Everything runs under locks taken in one order (the person's row, then their cycles by id), so
an activation that would make them take part waits, or wins first and the erasure is refused.
"""

from dataclasses import dataclass
from typing import Any

from flask_babel import gettext as _
from sqlalchemy import text
from sqlalchemy.orm import Session

from console.audit import record
from hr.errors import NotFound, StateConflict
from hr.throttle import account_key
from models import Employee, User
from models.audit import AuditAction, AuditTarget

ERASED = "[erased]"
ERASED_DOMAIN = "erased.invalid"

ACTIVE_CYCLES = """
SELECT c.id, c.name, c.status FROM review_cycles c
WHERE c.tenant_id = :tenant_id AND c.status IN ('draft', 'active') AND (
  EXISTS (SELECT 1 FROM cycle_participants p WHERE p.cycle_id = c.id AND p.employee_id = :id)
  OR EXISTS (SELECT 1 FROM reviews r WHERE r.cycle_id = c.id
             AND (r.reviewer_id = :id OR r.reviewee_id = :id)))
ORDER BY c.id
FOR UPDATE OF c
"""
# What was only under way: their exports, and their part in draft cycles.
FORGET_PENDING = [
    "DELETE FROM data_exports WHERE tenant_id = :tenant_id AND employee_id = :id",
    "DELETE FROM reviews r USING review_cycles c WHERE c.id = r.cycle_id AND c.status = 'draft'"
    " AND r.tenant_id = :tenant_id AND (r.reviewer_id = :id OR r.reviewee_id = :id)",
    "DELETE FROM cycle_participants p USING review_cycles c WHERE c.id = p.cycle_id"
    " AND c.status = 'draft' AND p.tenant_id = :tenant_id AND p.employee_id = :id",
]
EMPTY_COMMENTS = """
UPDATE reviews SET comments = ''
WHERE tenant_id = :tenant_id AND (reviewer_id = :id OR reviewee_id = :id) AND comments <> ''
"""
UNLINK = [
    "UPDATE reviews SET reviewer_id = NULL WHERE tenant_id = :tenant_id AND reviewer_id = :id",
    "UPDATE reviews SET reviewee_id = NULL WHERE tenant_id = :tenant_id AND reviewee_id = :id",
]
PSEUDONYM = """
UPDATE employees SET name = :name, email = :email, department = ''
WHERE tenant_id = :tenant_id AND id = :id
"""
# What an account did stays; it no longer says whose account it was.
FORGET_ACCOUNT = [
    "UPDATE audit_log SET user_id = NULL WHERE user_id = ANY(:users)",
    "UPDATE review_cycles SET activated_by = NULL WHERE activated_by = ANY(:users)",
    "UPDATE employee_imports SET created_by = NULL WHERE created_by = ANY(:users)",
    "UPDATE data_exports SET requested_by = NULL WHERE requested_by = ANY(:users)",
    "DELETE FROM users WHERE id = ANY(:users)",
]
THROTTLE = "DELETE FROM login_throttle WHERE scope = 'account' AND key = ANY(:keys)"
# The texts that may quote a person: {column} stands for the column with every term replaced by
# [erased], {column_mentions} for "the column holds one of the terms" (see _scrubbing).
SCRUB = [
    "UPDATE jobs SET last_error = {last_error}"
    " WHERE tenant_id = :tenant_id AND ({last_error_mentions})",
    "UPDATE job_attempts a SET error = {error}, traceback = {traceback}"
    " FROM jobs j WHERE j.id = a.job_id AND j.tenant_id = :tenant_id"
    " AND ({error_mentions} OR {traceback_mentions})",
    "UPDATE audit_log SET details = CAST({details_text} AS jsonb)"
    " WHERE tenant_id = :tenant_id AND ({details_text_mentions})",
    "UPDATE employee_imports SET content = {content}"
    " WHERE tenant_id = :tenant_id AND ({content_mentions})",
    "UPDATE employee_import_rows SET email = {email}, name = {name}, note = {note}"
    " WHERE tenant_id = :tenant_id AND ({email_mentions} OR {name_mentions} OR {note_mentions})",
]
COLUMNS = ("last_error", "error", "traceback", "content", "email", "name", "note")


@dataclass(frozen=True, slots=True)
class Erasure:
    employee_id: int
    pseudonym: str
    comments_removed: int
    reviews_unlinked: int
    accounts_deleted: int
    rows_scrubbed: int  # job errors, attempts, audit entries and import rows cleaned


def pseudonym(employee_id: int) -> tuple[str, str]:
    return f"Erased person {employee_id}", f"erased-{employee_id}@{ERASED_DOMAIN}"


def is_erased(employee: Employee) -> bool:
    return employee.email.endswith("@" + ERASED_DOMAIN)


def blocking_cycles(session: Session, employee: Employee) -> list[tuple[int, str]]:
    """The active cycles the person takes part in (as participant, reviewer or reviewee); locks
    their draft and active cycles until the transaction ends."""
    rows = session.execute(
        text(ACTIVE_CYCLES), {"tenant_id": employee.tenant_id, "id": employee.id}
    )
    return [(cycle_id, name) for cycle_id, name, status in rows if status == "active"]


def refusal(session: Session, employee: Employee, actor: User) -> str | None:
    """Why this person cannot be erased now (a sentence), or None."""
    if is_erased(employee):
        return _("%(name)s was erased already.", name=employee.name)
    if actor.employee_id == employee.id:
        return _("You cannot erase yourself: ask another HR admin.")
    cycles = blocking_cycles(session, employee)
    if cycles:
        names = ", ".join(f"“{name}”" for _id, name in cycles)
        return _(
            "%(name)s takes part in the active cycle %(cycles)s: their reviews are open."
            " Erase them once the cycle is closed.",
            name=employee.name,
            cycles=names,
        )
    return None


def erase_employee(session: Session, actor: User, employee_id: int, tenant_id: int) -> Erasure:
    """Erase the employee (not committed: the caller commits, and everything or nothing stays).
    Raises StateConflict with the reason when they cannot be erased now."""
    employee = session.get(Employee, employee_id, with_for_update=True, populate_existing=True)
    if employee is None or employee.tenant_id != tenant_id:
        raise NotFound(f"there is no employee {employee_id}")
    reason = refusal(session, employee, actor)
    if reason:
        raise StateConflict(reason)
    key: dict[str, Any] = {"tenant_id": tenant_id, "id": employee_id}
    old_name, old_email = employee.name, employee.email
    name, email = pseudonym(employee_id)
    accounts = list(
        session.execute(
            text("SELECT id, email, name FROM users WHERE tenant_id = :tenant_id"
                 " AND (employee_id = :id OR lower(email) = lower(:email))"),
            {**key, "email": old_email},
        )
    )  # fmt: skip
    terms = _terms(
        [old_email, *(account.email for account in accounts)],
        [old_name, *(account.name for account in accounts)],
    )

    for statement in FORGET_PENDING:
        session.execute(text(statement), key)
    comments = session.execute(text(EMPTY_COMMENTS), key).rowcount  # type: ignore[attr-defined]
    unlinked = sum(
        session.execute(text(statement), key).rowcount  # type: ignore[attr-defined]
        for statement in UNLINK
    )
    session.execute(text(PSEUDONYM), {**key, "name": name, "email": email})
    users = [account.id for account in accounts]
    for statement in FORGET_ACCOUNT:
        session.execute(text(statement), {"users": users})
    keys = [account_key(address) for address in terms.emails]
    session.execute(text(THROTTLE), {"keys": keys})

    scrubbed = sum(
        session.execute(text(statement), {**key, **params}).rowcount  # type: ignore[attr-defined]
        for statement, params in _scrubbing(terms)
    )
    session.expire(employee)
    record(
        session, actor, AuditAction.EMPLOYEE_ERASE, AuditTarget.EMPLOYEE, employee_id,
        tenant_id=tenant_id, affected=1 + len(users),
        details={"pseudonym": name, "comments_removed": comments, "reviews_unlinked": unlinked},
    )  # fmt: skip
    return Erasure(employee_id, name, comments, unlinked, len(users), scrubbed)


@dataclass(frozen=True, slots=True)
class _Terms:
    emails: list[str]  # the addresses, as written and lower-cased
    all: list[str]  # the addresses and names, longest first (a name inside an address goes last)


def _terms(emails: list[str], names: list[str]) -> _Terms:
    addresses = sorted({e for e in emails if e} | {e.lower() for e in emails if e})
    found = sorted({*addresses, *(n for n in names if n.strip())}, key=len, reverse=True)
    return _Terms(addresses, found)


def _scrubbing(terms: _Terms) -> list[tuple[str, dict[str, str]]]:
    """Each SCRUB statement with its parameters: the terms as they appear in text (:t0...)
    and inside jsonb's text, where a quote or a backslash is escaped (:j0...)."""
    as_json = [term.replace("\\", "\\\\").replace('"', '\\"') for term in terms.all]
    params = {"erased": ERASED}
    params |= {f"t{i}": term for i, term in enumerate(terms.all)}
    params |= {f"j{i}": term for i, term in enumerate(as_json)}
    count = len(terms.all)
    parts: dict[str, str] = {}
    for column in COLUMNS:
        parts[column] = _replaced(column, "t", count)
        parts[f"{column}_mentions"] = _mentions(column, "t", count)
    parts["details_text"] = _replaced("CAST(details AS text)", "j", count)
    parts["details_text_mentions"] = _mentions("CAST(details AS text)", "j", count)
    return [(statement.format(**parts), params) for statement in SCRUB]


def _replaced(expression: str, prefix: str, count: int) -> str:
    for index in range(count):
        expression = f"replace({expression}, :{prefix}{index}, :erased)"
    return expression


def _mentions(expression: str, prefix: str, count: int) -> str:
    return " OR ".join(f"strpos({expression}, :{prefix}{index}) > 0" for index in range(count))
