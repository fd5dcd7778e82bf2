"""What a request may carry, checked once before any view runs, and integers read safely.

PostgreSQL refuses a NUL character in text (and ``jsonb`` refuses ``\\u0000``), a lone surrogate
cannot be encoded as UTF-8, and an integer beyond 64 bits is out of range for ``bigint``: each
would surface as a 500 from deep inside a query. So, before the view (``check_request``):

- no NUL and no lone surrogate in the path, in a query parameter or form field (name or value),
  in an uploaded file's name, or in a JSON body;
- a JSON body, which Flask-WTF reads as form data, is an object of text values, as a form sends;
- a file only under a field name the view declares with ``@accepts_files(...)``: a file where
  a form expects text is refused.

A request that breaks one of these answers ``400 Bad Request`` saying what was refused, and
nothing is read or written for it. A form field over ``MAX_FORM_MEMORY_SIZE`` (500 kB) is
Werkzeug's ``413``; :class:`ClosingRequest` then closes the files already received.

Integers are bounded where they are read: ids in paths by :class:`BigIntConverter` (registered
as ``int``: a bigger number matches no route, 404), and ids and cursors in query strings by
:func:`query_int` and :func:`query_ints` (400).
"""

import json
import re
from collections.abc import Callable, Iterator
from typing import IO, Any, TypeVar

from flask import Flask, Request, abort, current_app, request
from flask_babel import gettext
from werkzeug.routing import IntegerConverter, Map

View = TypeVar("View", bound=Callable[..., Any])

BIGINT_MAX = 2**63 - 1
_DIGITS = re.compile(r"[0-9]{1,19}")
_REFUSED = re.compile("[\x00\ud800-\udfff]")


class BigIntConverter(IntegerConverter):
    """``<int:...>`` for ``bigint`` ids: ASCII digits, 0 to 2**63 - 1. Anything else matches no
    route (404) instead of reaching a query that PostgreSQL refuses (or ``int()``, which refuses
    more than 4,300 digits)."""

    regex = _DIGITS.pattern

    def __init__(self, map: Map, fixed_digits: int = 0, min: int | None = None,
                 max: int | None = BIGINT_MAX, signed: bool = False) -> None:  # fmt: skip
        super().__init__(map, fixed_digits, min, max, signed)


class ClosingRequest(Request):
    """Closes the temporary files of a multipart body it could not finish reading (a field
    over ``MAX_FORM_MEMORY_SIZE``, a malformed part), which Werkzeug's parser drops unclosed;
    the files it did read are closed with the request, as usual."""

    def _get_file_stream(self, total_content_length: int | None, content_type: str | None,
                         filename: str | None = None,
                         content_length: int | None = None) -> IO[bytes]:  # fmt: skip
        stream = super()._get_file_stream(
            total_content_length, content_type, filename, content_length
        )
        self.__dict__.setdefault("_received_files", []).append(stream)
        return stream

    def _load_form_data(self) -> None:
        try:
            super()._load_form_data()
        finally:
            files = self.__dict__.get("files")
            kept = {id(upload.stream) for _, upload in files.items(multi=True)} if files else set()
            for stream in self.__dict__.get("_received_files", []):
                if id(stream) not in kept:
                    stream.close()


def init_app(app: Flask) -> None:
    """Before any blueprint is registered: the converter is looked up when a rule is added."""
    app.request_class = ClosingRequest
    app.url_map.converters["int"] = BigIntConverter
    app.before_request(check_request)


def accepts_files(*names: str) -> Callable[[View], View]:
    """Let a view take uploaded files under these form field names (and no other)."""

    def declare(view: View) -> View:
        view.file_fields = frozenset(names)  # type: ignore[attr-defined]
        return view

    return declare


def check_request() -> None:
    """Answer 400 for a request carrying what no view can take (see the module's docstring)."""
    _refuse_text("path", request.path)
    for name, value in request.args.items(multi=True):
        _refuse_text("name of a query parameter", name)
        _refuse_text(f"query parameter {_shown(name)}", value)
    for name, value in request.form.items(multi=True):
        _refuse_field_name(name)
        _refuse_text(f"form field {_shown(name)}", value)
    allowed = getattr(current_app.view_functions.get(request.endpoint or ""), "file_fields", ())
    for name, upload in request.files.items(multi=True):
        _refuse_field_name(name)
        if name not in allowed:
            abort(400, f"The form field {_shown(name)} takes text, not a file.")
        _refuse_text(f"name of the file in {_shown(name)}", upload.filename or "")
    if request.is_json and request.get_data(cache=True):
        _check_json()


def query_int(name: str) -> int | None:
    """An id or cursor from the query string: None when absent or empty; 400 unless it is a
    whole number from 0 to 2**63 - 1."""
    value = request.args.get(name, "")
    return parse_id(name, value) if value else None


def query_ints(name: str) -> list[int]:
    """Every value of a repeated id parameter (``?job=1&job=2``); 400 if one is not an id."""
    return [parse_id(name, value) for value in request.args.getlist(name)]


def parse_id(name: str, value: str) -> int:
    """``value`` of the query parameter ``name`` as an id; 400 unless it is one."""
    number = as_id(value)
    if number is None:
        abort(
            400,
            gettext(
                "The query parameter %(name)s must be a whole number from 0 to %(max)s, not "
                "%(value)s.",
                name=_shown(name),
                max=BIGINT_MAX,
                value=_shown(value),
            ),
        )
    return number


def as_id(value: str) -> int | None:
    """``value`` as a ``bigint`` id (ASCII digits, 0 to 2**63 - 1), or None."""
    if not _DIGITS.fullmatch(value) or int(value) > BIGINT_MAX:
        return None
    return int(value)


def _check_json() -> None:
    try:
        body = json.loads(request.get_data(cache=True))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        abort(400, "The request body is not valid JSON.")
    if not isinstance(body, dict):
        abort(400, "A JSON body must be an object of form fields.")
    for name, value in body.items():
        _refuse_text("name of a JSON field", name)
        for item in _form_values(name, value):
            _refuse_text(f"JSON field {_shown(name)}", item)


def _form_values(name: str, value: Any) -> Iterator[str]:
    """The values of one JSON field read as a form field: text, or a list of texts."""
    values = value if isinstance(value, list) else [value]
    for item in values:
        if not isinstance(item, str):
            abort(400, f"The JSON field {_shown(name)} must be text or a list of texts.")
        yield item


def _refuse_field_name(name: str | None) -> None:
    """A multipart part whose Content-Disposition cannot be read has no name (None)."""
    if name is None:
        abort(400, "A part of the form has no readable name.")
    _refuse_text("name of a form field", name)


def _refuse_text(where: str, text: str) -> None:
    found = _REFUSED.search(text)
    if found is None:
        return
    what = (
        "a NUL character (U+0000)"
        if found.group() == "\x00"
        else "a lone surrogate (U+D800 to U+DFFF, half of a UTF-16 pair)"
    )
    abort(400, f"The {where} holds {what}, which Pauta does not accept.")


def _shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for a message: escaped, and cut at ``limit`` characters."""
    escaped = text.encode("unicode_escape").decode("ascii")
    return f"'{escaped}'" if len(escaped) <= limit else f"'{escaped[:limit]}...'"
