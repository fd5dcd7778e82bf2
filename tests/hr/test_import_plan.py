"""Planning an import: outcomes, refusals with their reasons, loops and order (pure)."""

from hr.employee_csv import EmployeeRow
from hr.import_plan import Existing, Step, plan_import


def row(line: int, email: str, manager: str | None = None, *, name: str = "",
        department: str = "Sales", problem: str | None = None) -> EmployeeRow:  # fmt: skip
    return EmployeeRow(line, name or email.split("@")[0], email, department, manager, problem)


def outcomes(steps: list[Step]) -> dict[int, tuple[str, str | None]]:
    return {step.row.line: (step.outcome, step.note) for step in steps}


def test_known_addresses_are_updated_or_left_alone_and_new_ones_created() -> None:
    existing = {
        "ana@x": Existing(1, "ana", "Sales", None),
        "bo@x": Existing(2, "bo", "Sales", "ana@x"),
    }
    steps = plan_import(
        [row(2, "ana@x"), row(3, "bo@x", "cy@x", department="Finance"), row(4, "cy@x", "ana@x")],
        existing,
    )
    assert outcomes(steps) == {
        2: ("unchanged", None),
        3: ("updated", "department Sales → Finance; manager ana@x → cy@x"),
        4: ("created", None),
    }
    # cy@x is new: it is created before bo@x, who will report to it.
    assert [step.row.line for step in steps] == [2, 4, 3]


def test_a_new_manager_comes_before_their_reports_wherever_they_are_in_the_file() -> None:
    rows = [row(2, "d@x", "c@x"), row(3, "c@x", "b@x"), row(4, "b@x", "a@x"), row(5, "a@x")]
    steps = plan_import(rows, {})
    assert [(step.row.email, step.depth) for step in steps] == [
        ("a@x", 0), ("b@x", 1), ("c@x", 2), ("d@x", 3),
    ]  # fmt: skip


def test_refused_rows_say_why_and_their_reports_follow() -> None:
    steps = plan_import(
        [
            row(2, "a@x", problem="the department is empty"),
            row(3, "b@x", "a@x"),  # its manager's row is refused
            row(4, "c@x", "b@x"),  # and so, in turn, is this one
            row(5, "d@x", "nobody@x"),
            row(6, "e@x"),
            row(7, "e@x", name="again"),
        ],
        {},
    )
    assert outcomes(steps) == {
        2: ("refused", "the department is empty"),
        3: ("refused", "the manager a@x (line 2) is refused"),
        4: ("refused", "the manager b@x (line 3) is refused"),
        5: ("refused", "the manager nobody@x is neither an employee nor in the file"),
        6: ("created", None),
        7: ("refused", "e@x is on line 6 already"),
    }


def test_a_loop_in_the_file_is_refused_whole_with_what_hangs_from_it() -> None:
    steps = plan_import(
        [row(2, "a@x", "c@x"), row(3, "b@x", "a@x"), row(4, "c@x", "b@x"), row(5, "d@x", "a@x")],
        {},
    )
    loop = "the manager chain would loop: a@x -> c@x -> b@x -> a@x"
    assert outcomes(steps) == {
        2: ("refused", loop), 3: ("refused", loop), 4: ("refused", loop),
        5: ("refused", "the manager a@x (line 2) is refused"),
    }  # fmt: skip


def test_a_loop_through_an_existing_employee_refuses_the_row_that_closes_it() -> None:
    # boss@x manages ana@x today; the file makes boss@x report to ana@x, and renames ana@x.
    existing = {
        "boss@x": Existing(1, "boss", "Sales", None),
        "ana@x": Existing(2, "ana", "Sales", "boss@x"),
    }
    steps = plan_import(
        [row(2, "boss@x", "ana@x"), row(3, "ana@x", "boss@x", name="Ana")], existing
    )
    assert outcomes(steps) == {
        2: ("refused", "the manager chain would loop: boss@x -> ana@x -> boss@x"),
        3: ("updated", "name ana → Ana"),
    }


def test_a_refused_existing_employee_keeps_their_manager_and_that_can_close_a_loop() -> None:
    # ana@x reports to boss@x; her row is refused, so she still does; boss@x's row, which makes
    # him report to ana@x, would then close a loop.
    existing = {
        "boss@x": Existing(1, "boss", "Sales", None),
        "ana@x": Existing(2, "ana", "Sales", "boss@x"),
    }
    steps = plan_import(
        [row(2, "ana@x", problem="the name is empty"), row(3, "boss@x", "ana@x")], existing
    )
    assert outcomes(steps)[3] == (
        "refused", "the manager chain would loop: boss@x -> ana@x -> boss@x"
    )  # fmt: skip
