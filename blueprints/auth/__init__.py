"""Log in and out; who the current user is and what their role lets them do."""

from blueprints.auth.access import login_manager, role_required
from blueprints.auth.routes import bp

__all__ = ["bp", "login_manager", "role_required"]
