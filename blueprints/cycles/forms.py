"""Forms of the cycles blueprint, each named for what it edits."""

from typing import Any

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from wtforms import (
    DateField,
    HiddenField,
    IntegerField,
    RadioField,
    SelectField,
    SelectMultipleField,
    StringField,
    SubmitField,
    TextAreaField,
)
from wtforms.fields.choices import SelectChoice
from wtforms.validators import (
    DataRequired,
    InputRequired,
    Length,
    NumberRange,
    Optional,
    ValidationError,
)
from wtforms.widgets import CheckboxInput, ListWidget

from blueprints.inputs import as_id
from hr.cycles import MAX_NAME_LENGTH, CycleDetails
from hr.review_plan import MAX_PEERS
from hr.reviews import MAX_COMMENT_LENGTH
from hr.text import is_one_line


class CycleForm(FlaskForm):
    name = StringField(_l("Name"), validators=[DataRequired(), Length(max=MAX_NAME_LENGTH)])
    period_start = DateField(_l("Period starts"), validators=[InputRequired()])
    period_end = DateField(_l("Period ends"), validators=[InputRequired()])
    due_date = DateField(_l("Reviews due"), validators=[InputRequired()])

    def validate_name(self, field: StringField) -> None:
        if field.data and not is_one_line(field.data):
            raise ValidationError(
                _("The name must be one line, without line breaks or control characters.")
            )

    def validate_period_end(self, field: DateField) -> None:
        if self.period_start.data and field.data and field.data < self.period_start.data:
            raise ValidationError(_("The period must end on or after its first day."))

    def validate_due_date(self, field: DateField) -> None:
        if self.period_start.data and field.data and field.data < self.period_start.data:
            raise ValidationError(_("The due date cannot be before the period starts."))

    def details(self) -> CycleDetails:
        return CycleDetails(
            name=self.name.data or "",
            period_start=self.period_start.data,  # type: ignore[arg-type]
            period_end=self.period_end.data,  # type: ignore[arg-type]
            due_date=self.due_date.data,  # type: ignore[arg-type]
        )


class ParticipantFilterForm(FlaskForm):
    """The GET form above the participant list; it changes nothing, so it has no CSRF token."""

    class Meta:
        csrf = False

    manager = SelectField(_l("Reports to"), coerce=int, default=0)
    department = SelectField(_l("Department"), default="")

    def __init__(self, *args: Any, managers: list[tuple[int, str]], departments: list[str],
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.manager.choices = [
            SelectChoice(0, _("Anyone")),
            *(SelectChoice(value, label) for value, label in managers),
        ]
        self.department.choices = [
            SelectChoice("", _("Any department")),
            *(SelectChoice(name) for name in departments),
        ]

    def criteria(self) -> dict[str, Any]:
        """The filter as keyword arguments of ``hr.directory.employees``; a value that is not
        one of the choices (an edited URL) is left out, and the page says so."""
        self.validate()
        manager = None if self.manager.errors else self.manager.data or None
        department = None if self.department.errors else self.department.data or None
        return {"under_manager": manager, "department": department}


class MultiCheckboxField(SelectMultipleField):
    widget = ListWidget(prefix_label=False)
    option_widget = CheckboxInput()


class ParticipantsForm(FlaskForm):
    """The employees shown (after filtering) and which of them take part.

    ``shown`` lists every employee on the page, so that unticking one removes them while the
    employees filtered out stay as they are. The confirmation page posts the same fields again,
    with ``dropping``.
    """

    employees = MultiCheckboxField(_l("Participants"), coerce=int, validate_choice=True)
    shown = HiddenField()  # ids of the employees on the page, comma-separated
    dropping = HiddenField()  # how many generated reviews the user agreed to drop
    save = SubmitField(_l("Save selection"))
    add_all = SubmitField(_l("Add everyone shown"))
    remove_all = SubmitField(_l("Remove everyone shown"))

    def show(self, choices: list[tuple[int, str]], chosen: set[int]) -> None:
        """Offer ``choices`` (id, label); on a fresh page, tick those in ``chosen``."""
        self.employees.choices = [SelectChoice(value, label) for value, label in choices]
        if not self.is_submitted():
            self.employees.data = [value for value, _ in choices if value in chosen]
            self.shown.data = ",".join(str(value) for value, _ in choices)

    def changes(self) -> tuple[set[int], set[int]]:
        """(to add, to remove) among the employees shown, by the button pressed."""
        offered = {choice.value for choice in self.employees.choices or []}
        posted = (self.shown.data or "").split(",")
        shown = {as_id(value) for value in posted} & offered
        if self.add_all.data:
            return shown, set()
        if self.remove_all.data:
            return set(), shown
        ticked = set(self.employees.data or []) & shown
        return ticked, shown - ticked

    def agreed_drops(self) -> int:
        """The number of generated reviews the confirmation page told the user it drops."""
        value = self.dropping.data or ""
        return int(value) if value.isdigit() else 0


class ReviewGenerationForm(FlaskForm):
    peers = IntegerField(
        _l("Peer reviews per person"),
        default=0,
        validators=[InputRequired(), NumberRange(min=0, max=MAX_PEERS)],
        description=_l(
            "0 for none; up to %(max)s, from colleagues who share the manager.", max=MAX_PEERS
        ),
    )


class ReviewSubmissionForm(FlaskForm):
    rating = RadioField(
        _l("Rating"),
        choices=[
            SelectChoice(5, _l("5 · Outstanding")),
            SelectChoice(4, _l("4 · Exceeds expectations")),
            SelectChoice(3, _l("3 · Meets expectations")),
            SelectChoice(2, _l("2 · Partly meets expectations")),
            SelectChoice(1, _l("1 · Does not meet expectations")),
        ],
        coerce=int,
        validators=[InputRequired(message=_l("Choose a rating."))],
    )
    comments = TextAreaField(
        _l("Comments"),
        validators=[DataRequired(), Length(max=MAX_COMMENT_LENGTH)],
        description=_l(
            "What went well, and what could be better. The reviewee's manager reads this."
        ),
    )


class ActionForm(FlaskForm):
    """A button that changes state (activate, close, cancel): only the CSRF token."""


class CalibrationForm(FlaskForm):
    """An HR admin's calibration decision on a cycle waiting for it."""

    decision = SelectField(
        _l("Decision"),
        choices=[SelectChoice("approve", _l("Approve: close the cycle and compile the report")),
                 SelectChoice("send_back", _l("Send back with a comment"))],
        validators=[InputRequired()],
    )  # fmt: skip
    comment = TextAreaField(_l("Comment"), validators=[Optional(), Length(max=2000)])
