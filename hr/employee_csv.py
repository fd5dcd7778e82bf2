"""The employee file: CSV with the columns name, email, department and manager_email.

Checked in two steps:

- at upload, in the request, so it must be quick (:func:`read_upload`): the size, the encoding
  (UTF-8, with or without a byte-order mark), no NUL byte, well-formed CSV, and a header naming
  the four columns; the rows are counted;
- in the import job, each row on its own (:func:`employee_rows`): a name and a department of one
  line, a valid e-mail address, a manager's address that is valid and not the employee's own.

Worker-side code: no Flask, no models.
"""

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from email_validator import EmailNotValidError, validate_email

from hr.i18n import format_number, gettext
from hr.text import is_one_line

COLUMNS = ("name", "email", "department", "manager_email")
MAX_BYTES = 10 * 1024 * 1024
MAX_TEXT_LENGTH = 200


class FileRefused(ValueError):
    """The file cannot be imported at all; the message says why, for the person who sent it."""


@dataclass(frozen=True, slots=True)
class UploadedFile:
    text: str
    rows: int  # data rows, blank lines and the header not counted


@dataclass(frozen=True, slots=True)
class EmployeeRow:
    """One data row: as written, and the e-mail addresses normalized (lowercase) when valid."""

    line: int  # where the row starts in the file; the header is line 1
    name: str
    email: str
    department: str
    manager_email: str | None
    problem: str | None = None  # why the row cannot be applied, whatever else the file holds


def read_upload(raw: bytes) -> UploadedFile:
    """The file as text with its row count; raises FileRefused."""
    if len(raw) > MAX_BYTES:
        raise FileRefused(
            gettext(
                "the file is %(size)s bytes; the limit is %(max)s (10 MiB)",
                size=format_number(len(raw)),
                max=format_number(MAX_BYTES),
            )
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise FileRefused(
            gettext(
                "the file is not UTF-8 text (byte %(byte)s is not UTF-8): save it as “CSV UTF-8” "
                "and try again",
                byte=format_number(error.start + 1),
            )
        ) from None
    if "\x00" in text:
        raise FileRefused(gettext("the file holds NUL bytes: it is not a CSV text file"))
    reader, _ = _open(text)
    try:  # counted as they stream by: the request keeps no row, and leaves no garbage
        rows = sum(1 for fields in reader if "".join(fields).strip())
    except csv.Error as error:
        raise FileRefused(not_csv(reader.line_num, error)) from None
    if not rows:
        raise FileRefused(gettext("the file has a header but no employee"))
    return UploadedFile(text, rows)


def not_csv(line: int, error: csv.Error) -> str:
    return gettext("line %(line)s is not CSV: %(error)s", line=line, error=error)


def employee_rows(text: str) -> list[EmployeeRow]:
    """Every data row of a file that :func:`read_upload` accepted, each checked on its own."""
    reader, columns = _open(text)
    return [_row(line, columns, fields) for line, fields in _data(reader)]


def _open(text: str) -> tuple[Any, list[str]]:
    """A CSV reader past the header line, and the header's column names (lowercased); raises
    FileRefused unless they are the four columns."""
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, [])
    except csv.Error as error:
        raise FileRefused(not_csv(1, error)) from None
    columns = [name.strip().lower() for name in header]
    if sorted(columns) != sorted(COLUMNS):
        found = ", ".join(name for name in columns if name) or gettext("nothing")
        raise FileRefused(
            gettext(
                "the first line must name the columns %(columns)s (in any order); it names "
                "%(found)s",
                columns=", ".join(COLUMNS),
                found=found,
            )
        )
    return reader, columns


def _data(reader: Any) -> Iterator[tuple[int, list[str]]]:
    """Each record that holds something, with the line it starts on."""
    start = reader.line_num + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise FileRefused(not_csv(start, error)) from None
        if "".join(fields).strip():
            yield start, fields
        start = reader.line_num + 1


def _row(line: int, header: list[str], fields: list[str]) -> EmployeeRow:
    values = dict(zip(header, fields, strict=False))
    name = values.get("name", "").strip()
    email = values.get("email", "").strip()
    department = values.get("department", "").strip()
    manager = values.get("manager_email", "").strip()
    row = EmployeeRow(line, name, email, department, manager or None)
    if len(fields) != len(header):
        return _refused(row, f"the line has {len(fields)} fields; the header has {len(header)}")
    for label, text in (("name", name), ("department", department)):
        if not text:
            return _refused(row, f"the {label} is empty")
        if len(text) > MAX_TEXT_LENGTH or not is_one_line(text):
            return _refused(
                row, f"the {label} must be one line of at most {MAX_TEXT_LENGTH} characters"
            )
    address, problem = _address(email)
    if problem:
        return _refused(row, problem)
    manager_address, problem = _address(manager) if manager else (None, None)
    if problem:
        return _refused(row, f"the manager's e-mail: {problem}")
    if manager_address == address:
        return _refused(row, "an employee cannot be their own manager")
    return EmployeeRow(line, name, address, department, manager_address)


def _address(text: str) -> tuple[str, str | None]:
    try:
        return validate_email(text, check_deliverability=False).normalized.lower(), None
    except EmailNotValidError as error:
        return text, f"{text!r} is not a valid e-mail address: {error}"


def _refused(row: EmployeeRow, problem: str) -> EmployeeRow:
    return EmployeeRow(row.line, row.name, row.email, row.department, row.manager_email, problem)
