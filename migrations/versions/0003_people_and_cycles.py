"""People and review cycles: employees, users, cycles, participants, reviews, notification dedup.

Revision ID: 0003_people_and_cycles
Revises: 0002_workers_and_stats
Create Date: 2026-11-30
"""

import sqlalchemy as sa
from alembic import op

revision = "0003_people_and_cycles"
down_revision = "0002_workers_and_stats"
branch_labels = None
depends_on = None

TIMESTAMPTZ = sa.DateTime(timezone=True)


def _tenant_fk(table: str, column: str, target: str, **options: str) -> sa.ForeignKeyConstraint:
    """A composite key (tenant_id, column) -> target (tenant_id, id): no cross-tenant links."""
    return sa.ForeignKeyConstraint(
        ["tenant_id", column],
        [f"{target}.tenant_id", f"{target}.id"],
        name=op.f(f"{table}_tenant_id_{column}_fkey"),
        **options,
    )


def upgrade() -> None:
    op.create_table(
        "employees",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("department", sa.Text(), nullable=False),
        sa.Column("manager_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("manager_id <> id", name=op.f("employees_not_own_manager_check")),
        _tenant_fk("employees", "manager_id", "employees"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("employees_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("employees_pkey")),
        sa.UniqueConstraint("tenant_id", "email", name=op.f("employees_tenant_id_email_key")),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("employees_tenant_id_id_key")),
    )
    op.create_index("employees_tenant_id_department_idx", "employees", ["tenant_id", "department"])
    op.create_index("employees_tenant_id_manager_id_idx", "employees", ["tenant_id", "manager_id"])

    op.create_table(
        "users",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("password_hash", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("active", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("employee_id", sa.BigInteger(), nullable=True),
        sa.Column("session_token", sa.Text(), nullable=False),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("last_login_at", TIMESTAMPTZ, nullable=True),
        sa.CheckConstraint(
            "role IN ('employee', 'hr_staff', 'hr_admin', 'platform_admin')",
            name=op.f("users_role_check"),
        ),
        sa.CheckConstraint("email = lower(email)", name=op.f("users_email_lowercase_check")),
        _tenant_fk("users", "employee_id", "employees"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name=op.f("users_tenant_id_fkey")),
        sa.PrimaryKeyConstraint("id", name=op.f("users_pkey")),
        sa.UniqueConstraint("email", name=op.f("users_email_key")),
        sa.UniqueConstraint("session_token", name=op.f("users_session_token_key")),
    )

    op.create_table(
        "review_cycles",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'draft'"), nullable=False),
        sa.Column("period_start", sa.Date(), nullable=False),
        sa.Column("period_end", sa.Date(), nullable=False),
        sa.Column("due_date", sa.Date(), nullable=False),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("activated_at", TIMESTAMPTZ, nullable=True),
        sa.Column("activated_by", sa.BigInteger(), nullable=True),
        sa.Column("participants_locked_at", TIMESTAMPTZ, nullable=True),
        sa.Column("closed_at", TIMESTAMPTZ, nullable=True),
        sa.CheckConstraint(
            "(status = 'closed') = (closed_at IS NOT NULL)",
            name=op.f("review_cycles_closed_at_check"),
        ),
        sa.CheckConstraint(
            "status IN ('draft', 'active', 'closed', 'cancelled')",
            name=op.f("review_cycles_status_check"),
        ),
        sa.CheckConstraint(
            "status NOT IN ('active', 'closed') OR"
            " (activated_at IS NOT NULL AND participants_locked_at IS NOT NULL)",
            name=op.f("review_cycles_activation_recorded_check"),
        ),
        sa.CheckConstraint("due_date >= period_start", name=op.f("review_cycles_due_date_check")),
        sa.CheckConstraint("period_start <= period_end", name=op.f("review_cycles_period_check")),
        sa.ForeignKeyConstraint(
            ["activated_by"], ["users.id"], name=op.f("review_cycles_activated_by_fkey")
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("review_cycles_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("review_cycles_pkey")),
        sa.UniqueConstraint("tenant_id", "id", name=op.f("review_cycles_tenant_id_id_key")),
    )
    op.create_index("review_cycles_tenant_id_status_idx", "review_cycles", ["tenant_id", "status"])

    op.create_table(
        "cycle_participants",
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("cycle_id", sa.BigInteger(), nullable=False),
        sa.Column("employee_id", sa.BigInteger(), nullable=False),
        _tenant_fk("cycle_participants", "cycle_id", "review_cycles", ondelete="CASCADE"),
        _tenant_fk("cycle_participants", "employee_id", "employees"),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("cycle_participants_tenant_id_fkey")
        ),
        sa.PrimaryKeyConstraint("cycle_id", "employee_id", name=op.f("cycle_participants_pkey")),
    )

    op.create_table(
        "reviews",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("cycle_id", sa.BigInteger(), nullable=False),
        sa.Column("reviewer_id", sa.BigInteger(), nullable=False),
        sa.Column("reviewee_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("rating", sa.SmallInteger(), nullable=True),
        sa.Column("comments", sa.Text(), server_default=sa.text("''"), nullable=False),
        sa.Column("submitted_at", TIMESTAMPTZ, nullable=True),
        sa.CheckConstraint(
            "(kind = 'self') = (reviewer_id = reviewee_id)", name=op.f("reviews_self_is_self_check")
        ),
        sa.CheckConstraint(
            "(status = 'submitted') = (submitted_at IS NOT NULL AND rating IS NOT NULL)",
            name=op.f("reviews_submitted_check"),
        ),
        sa.CheckConstraint("kind IN ('self', 'manager', 'peer')", name=op.f("reviews_kind_check")),
        sa.CheckConstraint(
            "status IN ('pending', 'open', 'submitted')", name=op.f("reviews_status_check")
        ),
        sa.CheckConstraint("rating BETWEEN 1 AND 5", name=op.f("reviews_rating_check")),
        _tenant_fk("reviews", "cycle_id", "review_cycles", ondelete="CASCADE"),
        _tenant_fk("reviews", "reviewee_id", "employees"),
        _tenant_fk("reviews", "reviewer_id", "employees"),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], name=op.f("reviews_tenant_id_fkey")),
        sa.PrimaryKeyConstraint("id", name=op.f("reviews_pkey")),
        sa.UniqueConstraint(
            "cycle_id",
            "reviewer_id",
            "reviewee_id",
            name=op.f("reviews_cycle_id_reviewer_id_reviewee_id_key"),
        ),
    )
    op.create_index("reviews_cycle_id_reviewee_id_idx", "reviews", ["cycle_id", "reviewee_id"])
    op.create_index(
        "reviews_tenant_id_reviewer_id_status_idx",
        "reviews",
        ["tenant_id", "reviewer_id", "status"],
    )

    # One notification per reviewer and cycle: a second job row for the same tenant, cycle and
    # reviewer cannot be inserted, whatever its state or the code inserting it.
    op.create_index(
        "jobs_notify_reviewer_key",
        "jobs",
        [
            "tenant_id",
            "task",
            sa.literal_column("(payload ->> 'cycle_id')"),
            sa.literal_column("(payload ->> 'reviewer_id')"),
        ],
        unique=True,
        postgresql_where=sa.text("task = 'hr.notify_reviewer'"),
    )


def downgrade() -> None:
    op.drop_index("jobs_notify_reviewer_key", table_name="jobs")
    op.drop_table("reviews")
    op.drop_table("cycle_participants")
    op.drop_table("review_cycles")
    op.drop_table("users")
    op.drop_table("employees")
