"""What an employee file does to a tenant's employees, row by row: a pure function of the
file's rows and the employees that exist, so that it can be tested without a database.

E-mail addresses identify employees: a row whose address exists updates that employee (or
leaves it unchanged), any other row creates one. Rows are refused, with the reason, when:

- the row itself is wrong (:mod:`hr.employee_csv`), or its address was on an earlier line;
- its manager is neither an employee nor an accepted row of the file (a manager whose own row
  was refused counts as missing, unless they exist already);
- applying it would close a loop in the manager tree (``a -> b -> a``): every row on the loop
  that changes someone's manager is refused, so a loop is never half applied; rows hanging
  from a refused new manager follow.

Accepted rows are ordered so that a new manager is created before their reports (by depth
under the first manager who exists already), then by line; refused rows keep their line.

Worker-side code: no Flask, no models.
"""

from dataclasses import dataclass

from hr.employee_csv import EmployeeRow

CREATED, UPDATED, UNCHANGED, REFUSED = "created", "updated", "unchanged", "refused"


@dataclass(frozen=True, slots=True)
class Existing:
    id: int
    name: str
    department: str
    manager_email: str | None


@dataclass(frozen=True, slots=True)
class Step:
    """One row and what applying it does."""

    row: EmployeeRow
    outcome: str  # created, updated, unchanged or refused
    note: str | None  # what changes (updated), or why not (refused)
    depth: int  # 0 for a row whose manager exists (or who has none); a new manager's + 1


def plan_import(rows: list[EmployeeRow], existing: dict[str, Existing]) -> list[Step]:
    """Every row of the file with its outcome, in the order to apply them."""
    refused: dict[int, str] = {row.line: row.problem for row in rows if row.problem}
    accepted: dict[str, EmployeeRow] = {}
    for row in rows:
        if row.line in refused:
            continue
        if row.email in accepted:
            refused[row.line] = f"{row.email} is on line {accepted[row.email].line} already"
        else:
            accepted[row.email] = row
    refused_at = {row.email: row.line for row in rows if row.line in refused}
    while _refuse_orphans(accepted, existing, refused, refused_at) or _refuse_loops(
        accepted, existing, refused, refused_at
    ):
        pass
    depths: dict[str, int] = {}
    steps = [
        Step(row, REFUSED, refused[row.line], 0)
        if row.line in refused
        else _step(row, existing.get(row.email), _depth(row.email, accepted, existing, depths))
        for row in rows
    ]
    return sorted(steps, key=lambda step: (step.depth, step.row.line))


def _refuse_orphans(
    accepted: dict[str, EmployeeRow],
    existing: dict[str, Existing],
    refused: dict[int, str],
    refused_at: dict[str, int],
) -> bool:
    """Refuse rows whose manager will not exist; True if any was."""
    orphans = [
        row
        for row in accepted.values()
        if row.manager_email
        and row.manager_email not in accepted
        and row.manager_email not in existing
    ]
    for row in orphans:
        manager = row.manager_email
        where = refused_at.get(manager or "")
        refused[row.line] = (
            f"the manager {manager} (line {where}) is refused"
            if where
            else f"the manager {manager} is neither an employee nor in the file"
        )
        refused_at[row.email] = row.line
        del accepted[row.email]
    return bool(orphans)


def _refuse_loops(
    accepted: dict[str, EmployeeRow],
    existing: dict[str, Existing],
    refused: dict[int, str],
    refused_at: dict[str, int],
) -> bool:
    """Refuse every row that makes a loop of the manager tree: the rows on the loop that give
    an employee another manager (a row that keeps the manager the employee has is not the
    cause). True if any was."""

    def manager_of(email: str) -> str | None:
        row = accepted.get(email)
        if row is not None:
            return row.manager_email
        known = existing.get(email)
        return known.manager_email if known else None

    settled: set[str] = set()  # addresses known to lead to the top of the tree, or to a loop
    loops: list[list[str]] = []
    for start in accepted:
        path: list[str] = []
        on_path: set[str] = set()
        email: str | None = start
        while email is not None and email not in settled:
            if email in on_path:
                loops.append(path[path.index(email) :])
                break
            path.append(email)
            on_path.add(email)
            email = manager_of(email)
        settled.update(path)

    def moves(email: str) -> bool:  # the row gives the employee a manager they do not have
        known = existing.get(email)
        return email in accepted and (
            known is None or known.manager_email != accepted[email].manager_email
        )

    culprits = [(email, loop) for loop in loops for email in loop if moves(email)]
    for email, loop in culprits:
        drawn = " -> ".join([*loop, loop[0]])
        line = accepted.pop(email).line
        refused[line] = f"the manager chain would loop: {drawn}"
        refused_at[email] = line
    return bool(culprits)


def _depth(
    email: str, accepted: dict[str, EmployeeRow], existing: dict[str, Existing],
    depths: dict[str, int],
) -> int:  # fmt: skip
    """0 if the row's manager exists or it has none; one more than a new manager's row."""
    chain = []
    while email not in depths:
        manager = accepted[email].manager_email
        if manager is None or manager in existing:
            depths[email] = 0
            break
        chain.append(email)
        email = manager
    for below in reversed(chain):
        depths[below] = depths[accepted[below].manager_email or ""] + 1
    return depths[chain[0]] if chain else depths[email]


def _step(row: EmployeeRow, known: Existing | None, depth: int) -> Step:
    if known is None:
        return Step(row, CREATED, None, depth)
    changes = [
        f"{label} {before or 'none'} → {after or 'none'}"
        for label, before, after in (
            ("name", known.name, row.name),
            ("department", known.department, row.department),
            ("manager", known.manager_email, row.manager_email),
        )
        if before != after
    ]
    if not changes:
        return Step(row, UNCHANGED, None, depth)
    return Step(row, UPDATED, "; ".join(changes), depth)
