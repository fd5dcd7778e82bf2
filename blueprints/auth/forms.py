"""Forms of the auth blueprint."""

from typing import Any

from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from pytz import common_timezones
from wtforms import EmailField, HiddenField, PasswordField, SelectField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import DataRequired, Length

from blueprints.locale import LANGUAGES


class LoginForm(FlaskForm):
    email = EmailField(_l("E-mail"), validators=[DataRequired(), Length(max=254)])
    password = PasswordField(_l("Password"), validators=[DataRequired(), Length(max=1024)])


class LogoutForm(FlaskForm):
    """No fields: the CSRF token is what makes log-out a deliberate act."""


class ProfileForm(FlaskForm):
    """What a user reads Pauta in: their language and time zone; empty: not chosen."""

    language = SelectField(_l("Language"))
    time_zone = SelectField(_l("Time zone"))

    def __init__(self, *args: Any, tenant_zone: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.language.choices = [
            SelectChoice("", _l("As my browser asks, else my organisation's default")),
            *(SelectChoice(code, name) for code, name in LANGUAGES.items()),
        ]
        self.time_zone.choices = [
            SelectChoice("", _l("My organisation's: %(zone)s", zone=tenant_zone)),
            *(SelectChoice(zone, zone.replace("_", " ")) for zone in common_timezones),
        ]


class LanguageForm(FlaskForm):
    """The top bar's switch: one button per language, and the page to come back to."""

    language = SelectField(choices=list(LANGUAGES))
    next = HiddenField()
