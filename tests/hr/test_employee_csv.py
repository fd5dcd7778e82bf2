"""The employee file: what the upload refuses at once, and how each row is checked."""

import pytest

from hr.employee_csv import MAX_BYTES, EmployeeRow, FileRefused, employee_rows, read_upload

HEADER = "name,email,department,manager_email\r\n"


def rows_of(body: str) -> list[EmployeeRow]:
    return employee_rows(read_upload((HEADER + body).encode()).text)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "the first line must name the columns name, email, department, manager_email"),
        (b"name,mail,department\n", "it names name, mail, department"),
        (HEADER.encode(), "the file has a header but no employee"),
        ((HEADER + "Ana,ana@x.example,Sales,\n").encode("utf-16"), "the file is not UTF-8 text"),
        ((HEADER + "An\xe9,a@x.example,S,\n").encode("latin-1"), "byte 40 is not UTF-8"),
        ((HEADER + "Ana\x00,a@x.example,S,\n").encode(), "the file holds NUL bytes"),
        ((HEADER + 'Ana,"a@x.example,S,\n').encode(), "line 2 is not CSV"),
        (b"x" * (MAX_BYTES + 1), "bytes; the limit is 10,485,760"),
    ],
)
def test_a_file_that_cannot_be_imported_is_refused_with_the_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(FileRefused, match=reason):
        read_upload(raw)


def test_columns_in_any_order_a_byte_order_mark_and_blank_lines_are_fine() -> None:
    raw = "\ufeffEMAIL,Name,manager_email,department\n\nana@x.example,Ana,,Sales\n\n".encode()
    upload = read_upload(raw)
    assert upload.rows == 1
    assert employee_rows(upload.text) == [EmployeeRow(3, "Ana", "ana@x.example", "Sales", None)]


def test_each_row_is_checked_on_its_own_and_keeps_its_line() -> None:
    rows = rows_of(
        "Ana,Ana@X.example,Sales,\r\n"
        '"Bo\r\nBerg",bo@x.example,Sales,\r\n'
        "Cy,cy@,Sales,\r\n"
        ",dee@x.example,Sales,\r\n"
        "Eve,eve@x.example,,\r\n"
        "Fay,fay@x.example,Sales,boss@\r\n"
        "Gil,gil@x.example,Sales,GIL@x.example\r\n"
        "Hal,hal@x.example,Sales\r\n"
        "Ivy,ivy@x.example,Sales,ana@x.example\r\n"
    )
    assert [(row.line, row.problem) for row in rows] == [
        (2, None),
        (3, "the name must be one line of at most 200 characters"),
        (5, "'cy@' is not a valid e-mail address: There must be something after the @-sign."),
        (6, "the name is empty"),
        (7, "the department is empty"),
        (8, "the manager's e-mail: 'boss@' is not a valid e-mail address: There must be"
            " something after the @-sign."),
        (9, "an employee cannot be their own manager"),
        (10, "the line has 3 fields; the header has 4"),
        (11, None),
    ]  # fmt: skip
    assert (rows[0].email, rows[-1].manager_email) == ("ana@x.example", "ana@x.example")
