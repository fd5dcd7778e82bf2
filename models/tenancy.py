"""Tenants: every customer's rows hang off one of these; `system` owns internal jobs."""

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, Identity, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from models import db

SYSTEM_TENANT_SLUG = "system"


class Tenant(db.Model):
    __tablename__ = "tenants"
    __table_args__ = (CheckConstraint("default_locale IN ('pt_BR', 'en')", name="default_locale"),)

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    slug: Mapped[str] = mapped_column(Text, unique=True)
    name: Mapped[str] = mapped_column(Text)
    # What its people read when they chose nothing themselves (blueprints/locale.py).
    default_locale: Mapped[str] = mapped_column(Text, server_default="pt_BR")
    default_time_zone: Mapped[str] = mapped_column(Text, server_default="America/Sao_Paulo")
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
