"""Loads the named statements of queries.sql."""

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

_HEADER = re.compile(r"^-- name: (\w+)\n-- (.+)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Query:
    name: str
    purpose: str
    sql: str


def parse(text: str) -> dict[str, Query]:
    headers = list(_HEADER.finditer(text))
    queries: dict[str, Query] = {}
    for header, following in zip(headers, [*headers[1:], None], strict=True):
        end = following.start() if following else len(text)
        name, purpose = header.group(1), header.group(2)
        if name in queries:
            raise ValueError(f"query {name!r} is defined twice")
        queries[name] = Query(name, purpose, text[header.end() : end].strip())
    return queries


@cache
def all_queries() -> dict[str, Query]:
    return parse(resources.files("jobqueue").joinpath("queries.sql").read_text())
