"""Forms of the people blueprint."""

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms.validators import ValidationError

from hr.employee_csv import COLUMNS


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
