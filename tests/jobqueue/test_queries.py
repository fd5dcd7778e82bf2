"""The named statements as the engine sends them: without the file's whole-line comments, and
short enough for psycopg to cache their parsing."""

from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

from jobqueue.queries import all_queries, parse
from workflows.store import all_queries as workflow_queries

TEXT = """-- name: first
-- What it is for.
SELECT 1  -- a note at the end of a line stays
-- a whole-line comment goes
    -- indented, too
FROM t

-- name: second
-- The next one.
SELECT '--not a comment'
"""


def test_whole_line_comments_are_left_out_and_the_rest_kept() -> None:
    queries = parse(TEXT)
    assert queries["first"].purpose == "What it is for."
    assert queries["first"].sql == "SELECT 1  -- a note at the end of a line stays\nFROM t"
    assert queries["second"].sql == "SELECT '--not a comment'"


def test_every_statement_is_short_enough_for_psycopg_to_cache_its_parsing() -> None:
    """Past the limit psycopg splits the statement into its parts again at every call (17 µs
    for job_finish, at every batch of results). kills: queries-keep-comment-lines"""
    statements = {**all_queries(), **workflow_queries()}
    too_long = {
        name: len(query.sql.encode())
        for name, query in statements.items()
        if len(query.sql.encode()) > MAX_CACHED_STATEMENT_LENGTH
    }
    assert too_long == {}
