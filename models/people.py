"""People: the accounts that log in (users, with their role) and the employees HR reviews."""

from datetime import datetime
from enum import StrEnum

from flask_login import UserMixin
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    Text,
    UniqueConstraint,
    func,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from models import db
from models.tenancy import Tenant


class Role(StrEnum):
    """What a user may do; the full table is docs/reference/roles.md."""

    EMPLOYEE = "employee"  # sees and submits their own reviews
    HR_STAFF = "hr_staff"  # prepares cycles: drafts, participants, reviews
    HR_ADMIN = "hr_admin"  # what HR staff do, plus activating, closing and cancelling
    PLATFORM_ADMIN = "platform_admin"  # operates the platform; sees every tenant


def one_of(column: str, values: type[StrEnum]) -> str:
    """A CHECK expression that keeps ``column`` inside a StrEnum's values."""
    return f"{column} IN ({', '.join(repr(str(value)) for value in values)})"


class Employee(db.Model):
    __tablename__ = "employees"
    __table_args__ = (
        # The target of composite foreign keys: a row can only point at an employee of its own
        # tenant, so a cross-tenant reference is impossible to write.
        UniqueConstraint("tenant_id", "id"),
        UniqueConstraint("tenant_id", "email"),
        ForeignKeyConstraint(["tenant_id", "manager_id"], ["employees.tenant_id", "employees.id"]),
        CheckConstraint("manager_id <> id", name="not_own_manager"),
        Index(None, "tenant_id", "manager_id"),
        Index(None, "tenant_id", "department"),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    name: Mapped[str] = mapped_column(Text)
    email: Mapped[str] = mapped_column(Text)
    department: Mapped[str] = mapped_column(Text)
    manager_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())


class User(UserMixin, db.Model):
    """An account. ``get_id`` hands Flask-Login the session token, not the primary key, so that
    rotating the token (at logout) invalidates every copy of every session cookie at once."""

    __tablename__ = "users"
    __table_args__ = (
        CheckConstraint(one_of("role", Role), name="role"),
        CheckConstraint("email = lower(email)", name="email_lowercase"),
        CheckConstraint("language IN ('pt_BR', 'en')", name="language"),
        ForeignKeyConstraint(["tenant_id", "employee_id"], ["employees.tenant_id", "employees.id"]),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    tenant_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("tenants.id"))
    email: Mapped[str] = mapped_column(Text, unique=True)  # log-in name, across all tenants
    name: Mapped[str] = mapped_column(Text)
    password_hash: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    active: Mapped[bool] = mapped_column(Boolean, server_default=true())
    employee_id: Mapped[int | None] = mapped_column(BigInteger)
    session_token: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
    last_login_at: Mapped[datetime | None]
    # Chosen on the profile page; None: the browser's language, else the tenant's default.
    language: Mapped[str | None] = mapped_column(Text)
    time_zone: Mapped[str | None] = mapped_column(Text)  # None: the tenant's default

    tenant: Mapped[Tenant] = relationship(lazy="joined", innerjoin=True)

    def get_id(self) -> str:
        return self.session_token

    @property
    def is_active(self) -> bool:
        return self.active

    @property
    def is_platform_admin(self) -> bool:
        return self.role == Role.PLATFORM_ADMIN
