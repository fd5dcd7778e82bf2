"""Leadership leases: one row per leader-only duty, held by one worker process for one term."""

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, Text
from sqlalchemy.orm import Mapped, mapped_column

from models import db


class Leader(db.Model):
    __tablename__ = "leaders"
    __table_args__ = (CheckConstraint("term > 0", name="term"),)

    name: Mapped[str] = mapped_column(Text, primary_key=True)  # the duty, e.g. 'maintenance'
    holder: Mapped[str] = mapped_column(Text)  # the leader's workers.name
    term: Mapped[int] = mapped_column(BigInteger)  # one more at each election after a lapse
    elected_at: Mapped[datetime]
    renewed_at: Mapped[datetime]
    expires_at: Mapped[datetime]  # database time; anyone may take over once it has passed
