"""The language and time zone of a request (Flask-Babel), and the catalogues' languages.

The language: the user's saved preference, else the browser's ``Accept-Language``, else the
tenant's default (``tenants.default_locale``, ``pt_BR`` unless set otherwise); a visitor who is
not logged in and sends no usable ``Accept-Language`` reads ``PAUTA_DEFAULT_LOCALE``. The time
zone: the user's, else the tenant's (``America/Sao_Paulo`` unless set otherwise).

Outside a request (the CLI, the worker) nothing is chosen here: Flask-Babel's default, English
and UTC, holds, so that CLI output and log lines stay English. E-mails pick their reader's
language themselves (``flask_babel.force_locale``).

Templates get ``_``, ``gettext`` and ``ngettext`` from Jinja's i18n extension, which
Flask-Babel installs; Python code imports them from ``flask_babel`` (``lazy_gettext`` for text
built at import time, such as form labels). docs/howto/translate.md says how to add a string.
"""

from flask import Flask, current_app, has_request_context, request
from flask_babel import Babel, get_locale
from flask_babel import lazy_gettext as _l
from flask_login import current_user
from pytz import all_timezones_set

from models import User
from models.people import Role

# The languages Pauta speaks, each named in itself (the switch shows these names untranslated).
LANGUAGES = {"pt_BR": "Português (Brasil)", "en": "English"}
DEFAULT_LOCALE = "pt_BR"
DEFAULT_TIME_ZONE = "America/Sao_Paulo"

ROLE_NAMES = {
    Role.EMPLOYEE: _l("employee"),
    Role.HR_STAFF: _l("HR staff"),
    Role.HR_ADMIN: _l("HR administrator"),
    Role.PLATFORM_ADMIN: _l("platform administrator"),
}

babel = Babel()


def init_app(app: Flask) -> None:
    app.config.setdefault("BABEL_DEFAULT_LOCALE", "en")
    app.config.setdefault("BABEL_DEFAULT_TIMEZONE", "UTC")
    app.config.setdefault("PAUTA_DEFAULT_LOCALE", DEFAULT_LOCALE)
    if app.config["PAUTA_DEFAULT_LOCALE"] not in LANGUAGES:
        raise RuntimeError(
            f"PAUTA_DEFAULT_LOCALE must be one of {', '.join(LANGUAGES)}, "
            f"not {app.config['PAUTA_DEFAULT_LOCALE']!r}"
        )
    babel.init_app(app, locale_selector=select_locale, timezone_selector=select_time_zone)
    app.add_template_global(LANGUAGES, "LANGUAGES")
    app.add_template_global(current_locale)
    app.add_template_global(role_name)


def current_locale() -> str:
    """The request's language as the catalogues name it: ``pt_BR``, ``en``."""
    return str(get_locale() or "en")


def role_name(role: str) -> str:
    """A role as its reader says it: "HR staff", "equipe de RH"."""
    return str(ROLE_NAMES[Role(role)]) if role in ROLE_NAMES else role


def select_locale() -> str | None:
    if not has_request_context():
        return None
    user = _user()
    if user is not None and user.language in LANGUAGES:
        return str(user.language)
    accepted = request.accept_languages.best_match(LANGUAGES)
    if accepted:
        return str(accepted)
    if user is not None and user.tenant.default_locale in LANGUAGES:
        return str(user.tenant.default_locale)
    return str(current_app.config["PAUTA_DEFAULT_LOCALE"])


def select_time_zone() -> str | None:
    if not has_request_context():
        return None
    user = _user()
    if user is None:
        return DEFAULT_TIME_ZONE
    for zone in (user.time_zone, user.tenant.default_time_zone):
        if zone in all_timezones_set:
            return str(zone)
    return DEFAULT_TIME_ZONE


def _user() -> User | None:
    """The logged-in user, or None (anonymous)."""
    return current_user if current_user.is_authenticated else None  # type: ignore[return-value]
