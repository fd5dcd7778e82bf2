"""The language and time zone people read Pauta in.

- ``users.language`` and ``users.time_zone``: chosen on the profile page; NULL means "not
  chosen" (the browser's language, else the tenant's default; the tenant's time zone).
- ``tenants.default_locale`` and ``tenants.default_time_zone``: what a tenant's people read
  when they chose nothing; ``pt_BR`` and ``America/Sao_Paulo`` unless set otherwise (the
  company behind the platform works in Brazil).

Revision ID: 0015_locale
Revises: 0011_login_throttle
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0015_locale"
down_revision = "0011_login_throttle"
branch_labels = None
depends_on = None

LANGUAGES = "('pt_BR', 'en')"


def upgrade() -> None:
    op.add_column("users", sa.Column("language", sa.Text(), nullable=True))
    op.add_column("users", sa.Column("time_zone", sa.Text(), nullable=True))
    op.create_check_constraint(op.f("users_language_check"), "users", f"language IN {LANGUAGES}")
    op.add_column(
        "tenants",
        sa.Column("default_locale", sa.Text(), server_default="pt_BR", nullable=False),
    )
    op.add_column(
        "tenants",
        sa.Column(
            "default_time_zone", sa.Text(), server_default="America/Sao_Paulo", nullable=False
        ),
    )
    op.create_check_constraint(
        op.f("tenants_default_locale_check"), "tenants", f"default_locale IN {LANGUAGES}"
    )


def downgrade() -> None:
    op.drop_column("tenants", "default_time_zone")
    op.drop_column("tenants", "default_locale")
    op.drop_column("users", "time_zone")
    op.drop_column("users", "language")
