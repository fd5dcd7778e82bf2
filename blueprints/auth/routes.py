"""Log in and log out."""

from urllib.parse import urlsplit

from flask import Blueprint, flash, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue
from flask_login import current_user, login_user, logout_user

from blueprints.auth.access import login_only
from blueprints.auth.forms import LoginForm
from blueprints.links import query_args
from hr.accounts import authenticate, end_sessions
from models import db
from models.people import Role

bp = Blueprint("auth", __name__)


@bp.route("/login", methods=["GET", "POST"])
@query_args("next")
def login() -> ResponseReturnValue:
    if current_user.is_authenticated:
        return redirect(home_for(current_user.role))
    form = LoginForm()
    if form.validate_on_submit():
        user = authenticate(db.session, form.email.data or "", form.password.data or "")
        if user is None:
            form.password.errors.append("The e-mail or the password is wrong.")
        else:
            end_sessions(user)  # a new session token: cookies of earlier log-ins stop working
            db.session.commit()
            session.clear()  # a fresh session: nothing planted before the log-in survives it
            login_user(user)
            return redirect(safe_next(request.args.get("next")) or home_for(user.role))
    return render_template("auth/login.html", form=form), 200 if not form.errors else 401


@bp.post("/logout")
@login_only
def logout() -> ResponseReturnValue:
    end_sessions(current_user)
    db.session.commit()
    logout_user()
    session.clear()
    flash("You are logged out.", "info")
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
