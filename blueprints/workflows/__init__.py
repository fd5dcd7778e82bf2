"""The workflows console: executions with filters, one execution's step timeline and waits, and
the actions that apply (send an event or approve, cancel, resume). HR admins see and act on their
tenant's executions; platform admins on every tenant's."""

from flask import Blueprint

bp = Blueprint("workflows", __name__, url_prefix="/workflows")

from blueprints.workflows import routes  # noqa: E402, F401 - registers the views

__all__ = ["bp"]
