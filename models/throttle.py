"""Failed log-ins, counted per account and per source address (see hr/throttle.py)."""

from datetime import datetime
from enum import StrEnum

from sqlalchemy import CheckConstraint, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from models import db
from models.people import one_of


class ThrottleScope(StrEnum):
    ACCOUNT = "account"  # key: the e-mail address typed, whether or not an account has it
    ADDRESS = "address"  # key: the client's IP address


class LoginThrottle(db.Model):
    __tablename__ = "login_throttle"
    __table_args__ = (
        CheckConstraint(one_of("scope", ThrottleScope), name="scope"),
        CheckConstraint("failures >= 0", name="failures"),
        Index(None, "window_ends_at"),  # the pruning of windows that have passed
    )

    scope: Mapped[str] = mapped_column(Text, primary_key=True)
    key: Mapped[str] = mapped_column(Text, primary_key=True)  # SHA-256 (hex) of the value
    failures: Mapped[int] = mapped_column(Integer)  # failed (or unfinished) log-ins in the window
    window_ends_at: Mapped[datetime]  # database time; after it the count starts again
