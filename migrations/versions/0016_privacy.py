"""Privacy (LGPD): HR's reading of a person's data in the audit log, erasure, and exports.

- ``audit_log``: the actions gain ``employee.view`` (an HR user opened an employee's record,
  with the comments of the reviews they wrote and received), ``employee.erase`` (an HR admin
  erased a person who left), ``employee.export`` and ``employee.export_download`` (an HR admin
  asked for everything about a person, and downloaded it), and the targets ``employee``
  (target_id: the employee's id). The constraints are rewritten whole: every action and target
  so far, plus these.
- ``data_exports``: one request for everything about a person: the job's state and progress
  (sections), the unguessable token of its download link, when the link expires, and the
  built JSON document and HTML page.
- ``schedules`` (engine): jobs the maintenance leader enqueues every ``every``, when
  ``next_run_at`` has come (the retention job's row is added when a tenant first sets a
  policy).
- ``privacy_settings``: each tenant's retention policy (years review comments of closed cycles
  and audit entries' details are kept; NULL: for good); ``retention_runs``: what each run of
  the retention job removed, per tenant (counts only). The audit log gains the action
  ``retention.policy`` and the target ``tenant``.
  ``audit_log.user_id`` may be NULL: an erased person's account is deleted, and the entries of
  what they did stay, by "an erased account".
- ``reviews.reviewer_id`` and ``reviewee_id`` may be NULL: an erased person's ratings stay, so
  that closed cycles' statistics still add up, but no longer point at anyone.

Revision ID: 0016_privacy
Revises: 0013_control
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0016_privacy"
down_revision = "0013_control"
branch_labels = None
depends_on = None

ACTIONS = (
    "job.requeue",
    "job.cancel",
    "job.run_now",
    "job.discard",
    "queue.pause",
    "queue.resume",
    "worker.drain",
    "employees.import",
    "workflow.event",
    "workflow.cancel",
    "workflow.resume",
    "queue.rate_limit",
)
TARGETS = ("job", "failure_group", "queue", "worker", "employee_import", "workflow_execution")
NEW_ACTIONS = (
    "employee.view",
    "employee.erase",
    "employee.export",
    "employee.export_download",
    "retention.policy",
)
EXPORT_STATES = ("queued", "running", "finished", "failed")
TIMESTAMPTZ = sa.DateTime(timezone=True)
NEW_TARGETS = ("employee", "tenant")


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _audit_values(ACTIONS + NEW_ACTIONS, TARGETS + NEW_TARGETS)
    op.alter_column("audit_log", "user_id", nullable=True)
    op.alter_column("reviews", "reviewer_id", nullable=True)
    op.alter_column("reviews", "reviewee_id", nullable=True)
    op.create_table(
        "data_exports",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("employee_id", sa.BigInteger(), nullable=False),
        sa.Column("requested_by", sa.BigInteger(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("expires_at", TIMESTAMPTZ, nullable=False),
        sa.Column("state", sa.Text(), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("sections_total", sa.Integer(), nullable=False),
        sa.Column("sections_done", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.Column("started_at", TIMESTAMPTZ, nullable=True),
        sa.Column("finished_at", TIMESTAMPTZ, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("content_json", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("content_html", sa.Text(), nullable=True),
        sa.CheckConstraint(_one_of("state", EXPORT_STATES), name=op.f("data_exports_state_check")),
        sa.CheckConstraint(
            "sections_done BETWEEN 0 AND sections_total", name=op.f("data_exports_progress_check")
        ),
        sa.CheckConstraint(
            "(state IN ('finished', 'failed')) = (finished_at IS NOT NULL)",
            name=op.f("data_exports_finished_at_check"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "employee_id"],
            ["employees.tenant_id", "employees.id"],
            name=op.f("data_exports_tenant_id_employee_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("data_exports_tenant_id_fkey")
        ),
        sa.ForeignKeyConstraint(
            ["requested_by"], ["users.id"], name=op.f("data_exports_requested_by_fkey")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("data_exports_pkey")),
        sa.UniqueConstraint("token", name=op.f("data_exports_token_key")),
    )
    op.create_index(
        "data_exports_tenant_id_employee_id_idx", "data_exports", ["tenant_id", "employee_id"]
    )
    op.create_table(
        "schedules",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("queue", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("every", postgresql.INTERVAL(), nullable=False),
        sa.Column("next_run_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("last_job_id", sa.BigInteger(), nullable=True),
        sa.CheckConstraint("every >= interval '1 second'", name=op.f("schedules_every_check")),
        sa.ForeignKeyConstraint(
            ["tenant_id"], ["tenants.id"], name=op.f("schedules_tenant_id_fkey"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("schedules_pkey")),
    )
    op.create_table(
        "privacy_settings",
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("comment_years", sa.Integer(), nullable=True),
        sa.Column("audit_detail_years", sa.Integer(), nullable=True),
        sa.Column("updated_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(
            "comment_years BETWEEN 1 AND 100", name=op.f("privacy_settings_comment_years_check")
        ),
        sa.CheckConstraint(
            "audit_detail_years BETWEEN 1 AND 100",
            name=op.f("privacy_settings_audit_detail_years_check"),
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("privacy_settings_tenant_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", name=op.f("privacy_settings_pkey")),
    )
    op.create_table(
        "retention_runs",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("tenant_id", sa.BigInteger(), nullable=False),
        sa.Column("ran_at", TIMESTAMPTZ, server_default=sa.func.now(), nullable=False),
        sa.Column("as_of", TIMESTAMPTZ, nullable=False),
        sa.Column("comments_removed", sa.Integer(), nullable=False),
        sa.Column("audit_details_removed", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["tenant_id"],
            ["tenants.id"],
            name=op.f("retention_runs_tenant_id_fkey"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("retention_runs_pkey")),
    )
    op.create_index("retention_runs_tenant_id_id_idx", "retention_runs", ["tenant_id", "id"])


def downgrade() -> None:
    op.drop_table("retention_runs")
    op.drop_table("privacy_settings")
    op.drop_table("schedules")
    op.drop_table("data_exports")
    op.execute("DELETE FROM reviews WHERE reviewer_id IS NULL OR reviewee_id IS NULL")
    op.alter_column("reviews", "reviewee_id", nullable=False)
    op.alter_column("reviews", "reviewer_id", nullable=False)
    op.execute("DELETE FROM audit_log WHERE user_id IS NULL")
    op.alter_column("audit_log", "user_id", nullable=False)
    op.execute(
        sa.text(
            "DELETE FROM audit_log WHERE action IN :actions OR target_type IN :targets"
        ).bindparams(
            sa.bindparam("actions", NEW_ACTIONS, expanding=True),
            sa.bindparam("targets", NEW_TARGETS, expanding=True),
        )
    )
    _audit_values(ACTIONS, TARGETS)


def _audit_values(actions: tuple[str, ...], targets: tuple[str, ...]) -> None:
    for name, column, values in (
        ("audit_log_action_check", "action", actions),
        ("audit_log_target_type_check", "target_type", targets),
    ):
        op.drop_constraint(op.f(name), "audit_log", type_="check")
        op.create_check_constraint(op.f(name), "audit_log", _one_of(column, values))
