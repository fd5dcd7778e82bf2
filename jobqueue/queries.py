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
        queries[name] = Query(name, purpose, _without_comment_lines(text[header.end() : end]))
    return queries


def _without_comment_lines(sql: str) -> str:
    """The statement without its whole-line comments, which the file keeps for its readers:
    psycopg caches a statement's parsing only up to 4,096 bytes, and job_finish with its
    comments is longer (parsed again at every call: 17 µs). Comments at a line's end stay."""
    lines = sql.strip().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("--"))


@cache
def all_queries() -> dict[str, Query]:
    return parse(resources.files("jobqueue").joinpath("queries.sql").read_text())
