"""A made-up organisation for demos and benchmarks: employees in a manager tree.

The tree is filled breadth first, each manager getting up to ``span`` reports: employee ``i``
(from 1) reports to employee ``(i - 1) // span``. The top person is in Leadership; everyone
else belongs to the department of the top person's report they descend from.
"""

import unicodedata
from dataclasses import dataclass

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from models import Employee, Tenant

FIRST_NAMES = (
    "Ana", "Bruno", "Chiara", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ivo", "Jana",
    "Kofi", "Lena", "Mateo", "Nadia", "Omar", "Priya", "Quentin", "Rosa", "Sven", "Tariq",
    "Uma", "Viktor", "Wen", "Ximena", "Yusuf", "Zofia",
)  # fmt: skip
LAST_NAMES = (
    "Almeida", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "García", "Horvat", "Ito",
    "Jansen", "Kowalski", "Laine", "Moreau", "Novak", "Okafor", "Petrov", "Quinn", "Rossi",
    "Silva", "Tanaka", "Urquhart", "Varga", "Weber", "Yilmaz",
)  # fmt: skip
DEPARTMENTS = ("Engineering", "Sales", "People", "Finance", "Operations", "Marketing")
TOP_DEPARTMENT = "Leadership"


def ascii_only(text: str) -> str:
    """``garcía`` -> ``garcia``: demo addresses stay plain ASCII."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()


@dataclass(frozen=True, slots=True)
class DemoPerson:
    name: str
    email: str
    department: str
    manager: int | None  # index of the manager in the list


def demo_people(count: int, domain: str, span: int = 5) -> list[DemoPerson]:
    """``count`` made-up employees in tree order, the top person first."""
    people: list[DemoPerson] = []
    for index in range(count):
        first = FIRST_NAMES[index % len(FIRST_NAMES)]
        last = LAST_NAMES[(index // len(FIRST_NAMES) + index % len(FIRST_NAMES)) % len(LAST_NAMES)]
        suffix = "" if index < len(FIRST_NAMES) * len(LAST_NAMES) else str(index)
        manager = None if index == 0 else (index - 1) // span
        if manager is None:
            department = TOP_DEPARTMENT
        elif manager == 0:
            department = DEPARTMENTS[(index - 1) % len(DEPARTMENTS)]
        else:
            department = people[manager].department
        name = f"{first} {last}{suffix}"
        email = ascii_only(f"{first}.{last}{suffix}@{domain}".lower())
        people.append(DemoPerson(name, email, department, manager))
    return people


def create_demo_employees(
    session: Session, tenant: Tenant, count: int, span: int = 5
) -> list[Employee]:
    """Insert the organisation for ``tenant`` (not committed); returns the employees in tree
    order, the top person first."""
    people = demo_people(count, f"{tenant.slug}.example", span)
    ids = list(
        session.scalars(
            insert(Employee).returning(Employee.id, sort_by_parameter_order=True),
            [
                {
                    "tenant_id": tenant.id,
                    "name": person.name,
                    "email": person.email,
                    "department": person.department,
                }
                for person in people
            ],
        )
    )
    session.execute(
        update(Employee),
        [
            {"id": employee_id, "manager_id": ids[person.manager]}
            for employee_id, person in zip(ids, people, strict=True)
            if person.manager is not None
        ],
    )
    return list(session.scalars(select(Employee).where(Employee.id.in_(ids)).order_by(Employee.id)))
