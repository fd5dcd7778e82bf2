"""The admin console: queues, jobs, failures, scheduled jobs, workers and the audit log.

Platform admins see every tenant and act; HR admins read their own tenant's jobs (see
docs/reference/roles.md). Live figures and chart series come from the ``metrics`` blueprint.
"""

from flask import Blueprint

bp = Blueprint("queues", __name__)

from blueprints.queues import failures, jobs, routes  # noqa: E402, F401 - registers the views

__all__ = ["bp"]
