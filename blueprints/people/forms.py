"""Forms of the people blueprint."""

from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms.validators import ValidationError

from hr.employee_csv import COLUMNS


class EmployeeImportForm(FlaskForm):
    file = FileField(
        "CSV file",
        validators=[FileRequired("Choose a CSV file.")],
        description=(
            f"Columns {', '.join(COLUMNS)} (the first line names them), UTF-8, at most 10 MiB."
        ),
    )

    def validate_file(self, field: FileField) -> None:
        if not field.data.filename.lower().endswith(".csv"):
            raise ValidationError("Choose a .csv file (comma-separated values, UTF-8).")
