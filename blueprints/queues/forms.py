"""Forms of the console: the filters above its lists, and the buttons of its actions."""

from typing import Any

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import HiddenField, IntegerField, SelectField, SelectMultipleField, StringField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired, Length, NumberRange, Optional, ValidationError

from blueprints.inputs import BIGINT_MAX
from blueprints.words import JOB_STATES as JOB_STATE_NAMES
from jobqueue.inspect import JobFilter

# The job states, with "scheduled" (available, not visible yet) told apart from "available".
JOB_STATES = ("available", "scheduled", "running", "succeeded", "dead", "cancelled")
ERROR_LENGTH = _l("Search for 3 to 200 characters of the error.")
SELECTED = "selected"  # a failure action's scope when it acts on the jobs ticked only


class ActionForm(FlaskForm):
    """One button acting on one target; ``next`` is the console page to come back to."""

    next = HiddenField()


class RateLimitForm(FlaskForm):
    """A queue's rate limit: at most ``limit`` starts per ``period``; no limit clears it."""

    limit = IntegerField(_l("Starts"), validators=[Optional(), NumberRange(min=1, max=1_000_000)])
    period = SelectField(
        _l("per"),
        choices=[
            SelectChoice("second", _l("second")),
            SelectChoice("minute", _l("minute")),
            SelectChoice("hour", _l("hour")),
        ],
    )


class FailureActionForm(FlaskForm):
    """A bulk action on a failure group: every dead job up to ``max_id`` (the newest job its
    confirmation counted), or, with ``scope`` "selected", only the ``jobs`` ticked among them
    (none ticked: none)."""

    max_id = IntegerField(validators=[InputRequired(), NumberRange(min=0, max=BIGINT_MAX)])
    scope = HiddenField()
    jobs = SelectMultipleField(coerce=int, validate_choice=False)

    def validate_jobs(self, field: SelectMultipleField) -> None:
        if any(not 0 <= job <= BIGINT_MAX for job in field.data or []):
            raise ValidationError(_("Not a job id."))

    def selected(self) -> list[int] | None:
        """The ids ticked, or None for the whole group."""
        if self.scope.data == SELECTED or self.jobs.data:
            return list(self.jobs.data or [])
        return None


class TenantFilterForm(FlaskForm):
    """The tenant a platform admin narrows every figure and list to (GET, no CSRF token)."""

    class Meta:
        csrf = False

    tenant = SelectField(_l("Tenant"), default="")

    def __init__(self, *args: Any, tenants: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tenant.choices = [
            SelectChoice("", _("Every tenant")),
            *(SelectChoice(slug, name) for slug, name in tenants),
        ]


class JobFilterForm(FlaskForm):
    """The filters above the job list (GET, no CSRF token)."""

    class Meta:
        csrf = False

    state = SelectField(
        _l("State"),
        default="",
        choices=[
            SelectChoice("", _l("Any state")),
            *(SelectChoice(s, JOB_STATE_NAMES[s]) for s in JOB_STATES),
        ],
    )
    queue = StringField(_l("Queue"), validators=[Optional(), Length(max=63)])
    task = StringField(_l("Task"), validators=[Optional(), Length(max=200)])
    error = StringField(
        _l("Error contains"),
        validators=[Optional(), Length(min=3, max=200, message=ERROR_LENGTH)],
        description=_l("at least 3 characters"),
    )
    payload = StringField(
        _l("Payload"),
        validators=[Optional(), Length(max=200)],
        description=_l("key=value, e.g. cycle_id=7"),
    )

    def validate_payload(self, field: StringField) -> None:
        key, equals, _value = (field.data or "").partition("=")
        if field.data and (not equals or not key.strip()):
            raise ValidationError(_("Write the payload filter as key=value."))

    def criteria(self, tenant_id: int | None) -> JobFilter:
        """The filter for ``JobInspector.jobs``; fields that did not validate are left out."""
        self.validate()
        key, _, value = (self.payload.data or "").partition("=")
        payload = bool(self.payload.data) and not self.payload.errors
        return JobFilter(
            tenant_id=tenant_id,
            state=None if self.state.errors else (self.state.data or None),
            queue=_text(self.queue),
            task=_text(self.task),
            error=_text(self.error),
            payload_key=key.strip() if payload else None,
            payload_value=value.strip() if payload else None,
        )


def _text(field: StringField) -> str | None:
    return None if field.errors else ((field.data or "").strip() or None)
