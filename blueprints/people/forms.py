"""Forms of the people blueprint."""

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms import IntegerField
from wtforms.validators import NumberRange, Optional, ValidationError

from hr.employee_csv import COLUMNS

MAX_YEARS = 100


class EmployeeImportForm(FlaskForm):
    file = FileField(
        _l("CSV file"),
        validators=[FileRequired(_l("Choose a CSV file."))],
        description=_l(
            "Columns %(columns)s (the first line names them), UTF-8, at most 10 MiB.",
            columns=", ".join(COLUMNS),
        ),
    )

    def validate_file(self, field: FileField) -> None:
        if not field.data.filename.lower().endswith(".csv"):
            raise ValidationError(_("Choose a .csv file (comma-separated values, UTF-8)."))


class RetentionForm(FlaskForm):
    comment_years = IntegerField(
        _l("Keep review comments of closed cycles (years)"),
        validators=[Optional(), NumberRange(min=1, max=MAX_YEARS)],
        description=_l("Counted from the cycle's closing; empty keeps them for good."),
    )
    audit_detail_years = IntegerField(
        _l("Keep the details of audit entries (years)"),
        validators=[Optional(), NumberRange(min=1, max=MAX_YEARS)],
        description=_l("Who did what, and when, stays; empty keeps the details for good."),
    )
