"""Accounts: creating users, checking passwords, ending sessions.

Passwords are hashed with Argon2id at argon2-cffi's defaults (RFC 9106's low-memory profile:
t=3, m=64 MiB, p=4), which meet OWASP ASVS 2.4; hashes made with weaker parameters are
upgraded at the next successful log-in.
"""

import secrets

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from email_validator import EmailNotValidError, validate_email
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from hr.errors import InvalidInput
from models import Employee, Tenant, User
from models.people import Role

MIN_PASSWORD_LENGTH = 12

hasher = PasswordHasher()
# Verified against when the e-mail is unknown, so that a miss costs as long as a wrong password.
_UNKNOWN_USER_HASH = hasher.hash(secrets.token_urlsafe(16))


def normalize_email(address: str) -> str:
    """The address as stored: syntax checked, lowercased; raises InvalidInput."""
    try:
        checked = validate_email(address.strip(), check_deliverability=False)
    except EmailNotValidError as error:
        raise InvalidInput(f"{address!r} is not a valid e-mail address: {error}") from None
    return checked.normalized.lower()


def new_session_token() -> str:
    return secrets.token_urlsafe(32)


def create_user(
    session: Session,
    *,
    tenant: Tenant,
    email: str,
    name: str,
    role: Role,
    password: str,
    employee: Employee | None = None,
) -> User:
    """Add a user (not committed); refuses a short password, a taken e-mail or an employee
    of another tenant."""
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(f"the password needs at least {MIN_PASSWORD_LENGTH} characters")
    address = normalize_email(email)
    if session.scalar(select(func.count()).where(User.email == address)):
        raise InvalidInput(f"a user with the e-mail {address} already exists")
    if employee is not None and employee.tenant_id != tenant.id:
        raise InvalidInput("the employee belongs to another tenant")
    user = User(
        tenant_id=tenant.id,
        email=address,
        name=name.strip() or address,
        role=role,
        password_hash=hasher.hash(password),
        employee_id=employee.id if employee else None,
        session_token=new_session_token(),
    )
    session.add(user)
    session.flush()
    return user


def authenticate(session: Session, email: str, password: str) -> User | None:
    """The active user with this e-mail and password, or None; rehashes an outdated hash."""
    user = session.scalars(select(User).where(User.email == email.strip().lower())).one_or_none()
    try:
        hasher.verify(user.password_hash if user else _UNKNOWN_USER_HASH, password)
    except (VerificationError, InvalidHashError):
        return None
    if user is None or not user.active:
        return None
    if hasher.check_needs_rehash(user.password_hash):
        user.password_hash = hasher.hash(password)
    user.last_login_at = func.now()
    return user


def end_sessions(user: User) -> None:
    """Invalidate every session cookie ever issued to ``user`` (not committed)."""
    user.session_token = new_session_token()
