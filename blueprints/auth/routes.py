"""Log in and log out."""

import math
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask.typing import ResponseReturnValue
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user, login_user, logout_user

from blueprints.auth.access import login_only
from blueprints.auth.forms import LoginForm
from blueprints.links import query_args
from hr.accounts import authenticate, end_sessions
from hr.throttle import count_attempt, forgive
from models import db
from models.people import Role

bp = Blueprint("auth", __name__)


@bp.route("/login", methods=["GET", "POST"])
@query_args("next")
def login() -> ResponseReturnValue:
    if current_user.is_authenticated:
        return redirect(home_for(current_user.role))
    form = LoginForm()
    if not form.validate_on_submit():
        return render_template("auth/login.html", form=form), 200 if not form.errors else 401
    email, source = form.email.data or "", request.remote_addr or ""
    wait = count_attempt(db.session, current_app.config["PAUTA_LOGIN_LIMITS"], email, source)
    db.session.commit()  # counted before the password is checked: parallel guesses see it
    if wait is not None:
        return too_many_attempts(form, wait)
    user = authenticate(db.session, email, form.password.data or "")
    if user is None:
        form.password.errors.append(_("The e-mail or the password is wrong."))
        return render_template("auth/login.html", form=form), 401
    forgive(db.session, email, source)
    end_sessions(user)  # a new session token: cookies of earlier log-ins stop working
    db.session.commit()
    session.clear()  # a fresh session: nothing planted before the log-in survives it
    login_user(user)
    return redirect(safe_next(request.args.get("next")) or home_for(user.role))


def too_many_attempts(form: LoginForm, wait: int) -> ResponseReturnValue:
    """429 with ``Retry-After``: the same answer whether or not an account has the e-mail."""
    minutes = math.ceil(wait / 60)
    form.password.errors.append(
        ngettext(
            "Too many failed log-ins for this e-mail address or from your network. "
            "Try again in %(num)d minute.",
            "Too many failed log-ins for this e-mail address or from your network. "
            "Try again in %(num)d minutes.",
            minutes,
        )
    )
    page = render_template("auth/login.html", form=form)
    return page, 429, {"Retry-After": str(wait)}


@bp.post("/logout")
@login_only
def logout() -> ResponseReturnValue:
    end_sessions(current_user)
    db.session.commit()
    logout_user()
    session.clear()
    flash(_("You are logged out."), "info")
    return redirect(url_for("auth.login"))


@bp.app_errorhandler(403)
def forbidden(_error: Exception) -> ResponseReturnValue:
    return render_template("auth/forbidden.html"), 403


def home_for(role: str) -> str:
    """Where a user lands after logging in."""
    if role == Role.EMPLOYEE:
        return url_for("cycles.my_reviews")
    return url_for("cycles.cycle_list")


def safe_next(target: str | None) -> str | None:
    """``next`` only when it is a path on this site (no scheme, no host, no ``//`` or
    backslash that a browser would read as one): no open redirect."""
    if not target:
        return None
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/"):
        return None
    if target.startswith("//") or "\\" in target:
        return None
    return target
