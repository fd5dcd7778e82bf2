"""Forms of the auth blueprint."""

from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import EmailField, PasswordField
from wtforms.validators import DataRequired, Length


class LoginForm(FlaskForm):
    email = EmailField(_l("E-mail"), validators=[DataRequired(), Length(max=254)])
    password = PasswordField(_l("Password"), validators=[DataRequired(), Length(max=1024)])


class LogoutForm(FlaskForm):
    """No fields: the CSRF token is what makes log-out a deliberate act."""
