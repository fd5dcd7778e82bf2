"""Privacy (LGPD): HR's reading of a person's data in the audit log, and erasure.

- ``audit_log``: the actions gain ``employee.view`` (an HR user opened an employee's record,
  with the comments of the reviews they wrote and received) and ``employee.erase`` (an HR admin
  erased a person who left), and the targets ``employee`` (target_id: the employee's id). The
  constraints are rewritten whole: every action and target so far, plus these.
  ``audit_log.user_id`` may be NULL: an erased person's account is deleted, and the entries of
  what they did stay, by "an erased account".
- ``reviews.reviewer_id`` and ``reviewee_id`` may be NULL: an erased person's ratings stay, so
  that closed cycles' statistics still add up, but no longer point at anyone.

Revision ID: 0016_privacy
Revises: 0011_login_throttle
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0016_privacy"
down_revision = "0011_login_throttle"
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
)
TARGETS = ("job", "failure_group", "queue", "worker", "employee_import")
NEW_ACTIONS = ("employee.view", "employee.erase")
NEW_TARGETS = ("employee",)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


def upgrade() -> None:
    _audit_values(ACTIONS + NEW_ACTIONS, TARGETS + NEW_TARGETS)
    op.alter_column("audit_log", "user_id", nullable=True)
    op.alter_column("reviews", "reviewer_id", nullable=True)
    op.alter_column("reviews", "reviewee_id", nullable=True)


def downgrade() -> None:
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
