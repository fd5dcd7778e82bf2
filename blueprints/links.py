"""Links back to the page being shown, built only from the query parameters its view reads.

A view names the query parameters it reads with ``@query_args(...)``. ``this_page(**changes)``
(also a template global) and ``kept_args()`` carry over those and nothing else. The query
string is never handed to ``url_for`` whole: a key such as ``endpoint``, ``_method``,
``_external`` or ``_scheme`` would break the link, or, with a forged ``Host`` header, point it
at another site.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Flask, current_app, request, url_for

View = TypeVar("View", bound=Callable[..., Any])


def init_app(app: Flask) -> None:
    app.add_template_global(this_page)
    app.add_template_global(kept_args)


def query_args(*names: str) -> Callable[[View], View]:
    """Declare the query parameters a view reads (its filters and cursors)."""

    def declare(view: View) -> View:
        view.query_args = names  # type: ignore[attr-defined]
        return view

    return declare


def declared() -> tuple[str, ...]:
    """The query parameters the current request's view reads."""
    view = current_app.view_functions.get(request.endpoint or "")
    return getattr(view, "query_args", ())


def kept_args(without: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """(name, value) of the request's declared query parameters, repeated ones included."""
    return [
        (name, value)
        for name in declared()
        if name not in without
        for value in request.args.getlist(name)
    ]


def this_page(**changes: Any) -> str:
    """The current page's path with its declared query parameters, changed by ``changes``
    (``None`` drops one)."""
    arguments: dict[str, Any] = {}
    for name, value in kept_args():
        arguments.setdefault(name, []).append(value)
    arguments.update(changes)
    return url_for(request.endpoint or "", **(request.view_args or {}), **arguments)
