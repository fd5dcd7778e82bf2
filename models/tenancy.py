"""Tenants: every customer's rows hang off one of these; `system` owns internal jobs."""

from datetime import datetime

from sqlalchemy import BigInteger, Identity, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from models import db

SYSTEM_TENANT_SLUG = "system"


class Tenant(db.Model):
    __tablename__ = "tenants"

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    slug: Mapped[str] = mapped_column(Text, unique=True)
    name: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(server_default=func.now())
