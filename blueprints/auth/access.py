"""Who is asking (Flask-Login) and whether their role may: the one decorator every view wears.

``@role_required(...)`` sends an anonymous visitor to the log-in page and answers 403 to a user
whose role is not listed. The roles are recorded on the view as ``allowed_roles`` so that tests
can hold every route against the table in docs/reference/roles.md.
"""

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from flask import abort
from flask_babel import lazy_gettext as _l
from flask_login import LoginManager, current_user
from sqlalchemy import select

from models import User, db
from models.people import Role

View = TypeVar("View", bound=Callable[..., Any])

login_manager = LoginManager()
login_manager.login_view = "auth.login"
login_manager.login_message = _l("Please log in to see that page.")  # type: ignore[assignment]
login_manager.localize_callback = str  # the lazy text, in the language of the request
login_manager.login_message_category = "info"


@login_manager.user_loader
def load_user(session_token: str) -> User | None:
    """The active user whose current session token the cookie carries; anyone else is anonymous."""
    return db.session.scalars(
        select(User).where(User.session_token == session_token, User.active)
    ).one_or_none()


def role_required(*roles: Role) -> Callable[[View], View]:
    """Let only logged-in users with one of ``roles`` through."""
    allowed = frozenset(roles)

    def decorate(view: View) -> View:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if not current_user.is_authenticated:
                return login_manager.unauthorized()
            if current_user.role not in allowed:
                abort(403)
            return view(*args, **kwargs)

        guarded.allowed_roles = allowed  # type: ignore[attr-defined]
        return guarded  # type: ignore[return-value]

    return decorate


def login_only(view: View) -> View:
    """Any logged-in user, whatever the role (log out)."""
    return role_required(*Role)(view)
