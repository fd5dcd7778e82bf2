"""Forms of the workflows console: the list's filters and the event form."""

from datetime import UTC, datetime, time, timedelta

from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import DateField, HiddenField, SelectField, StringField, TextAreaField
from wtforms.fields.choices import SelectChoice
from wtforms.validators import InputRequired, Length, Optional

from workflows.store import ExecutionFilter

STATUSES = ("pending", "running", "waiting", "succeeded", "failed", "cancelled")


class ExecutionFilterForm(FlaskForm):
    """The filters above the executions list (GET, no CSRF token)."""

    class Meta:
        csrf = False

    name = StringField(_l("Workflow"), validators=[Optional(), Length(max=200)])
    status = SelectField(
        _l("Status"),
        default="",
        choices=[SelectChoice("", _l("Any status")), *(SelectChoice(s) for s in STATUSES)],
    )
    waiting_on = StringField(
        _l("Waiting on"),
        validators=[Optional(), Length(max=200)],
        description=_l("an event key, or sleep"),
    )
    started_from = DateField(_l("Started from"), validators=[Optional()])
    started_to = DateField(_l("Started to"), validators=[Optional()], description=_l("inclusive"))

    def criteria(self, tenant_id: int | None) -> ExecutionFilter:
        """The filter for ``WorkflowInspector.executions``; fields that did not validate are
        left out."""
        self.validate()
        start = None if self.started_from.errors else self.started_from.data
        end = None if self.started_to.errors else self.started_to.data
        return ExecutionFilter(
            tenant_id=tenant_id,
            status=None if self.status.errors else (self.status.data or None),
            name=_text(self.name),
            waiting_on=_text(self.waiting_on),
            started_from=datetime.combine(start, time(), UTC) if start else None,
            started_to=datetime.combine(end, time(), UTC) + timedelta(days=1) if end else None,
        )


class EventForm(FlaskForm):
    """Send an event to a waiting execution: its key and a JSON payload."""

    key = StringField(_l("Event key"), validators=[InputRequired(), Length(max=200)])
    payload = TextAreaField(_l("Payload (JSON)"), validators=[Optional(), Length(max=10_000)])
    next = HiddenField()


class ExecutionActionForm(FlaskForm):
    """One button acting on one execution (cancel, resume)."""

    next = HiddenField()


def _text(field: StringField) -> str | None:
    value = (field.data or "").strip()
    return value if value and not field.errors else None
