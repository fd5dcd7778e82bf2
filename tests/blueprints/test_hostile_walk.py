"""Every route in ``app.url_map``, for every role, with hostile values in each path segment,
query parameter and form field, with and without a valid CSRF token: never a 5xx, and nothing
written for a request that was refused (4xx).

The routes, their path arguments, the query parameters each view declares
(``@query_args``), the fields of every form class and the fields of each route's own page are
all read from the running app, so a route added tomorrow is walked too. Values: NUL, lone
surrogates (sent as their UTF-8 bytes, and as JSON escapes), integers beyond 64 bits and
negative ones, a 1 MB string, other unicode, extra query keys (``endpoint``, ``_external``...),
files in text fields, and a forged ``Host`` that must appear in no link or redirect. Each
route gets the pinned cases below and then ``EXAMPLES`` cases drawn by Hypothesis, derandomized
so that every run sends the same requests. A route that turns the role away before its view
runs (403, or a redirect to log in) gets the pinned cases only.
"""

import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, urlencode

import psycopg
import pytest
from flask_wtf import FlaskForm
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from werkzeug.datastructures import Headers
from werkzeug.test import EnvironBuilder, run_wsgi_app
from wtforms.fields.core import UnboundField

from models.people import Role
from tests.support.db import scalar, table_digests
from tests.support.factories import login_as
from tests.support.jobs import make_job
from tests.support.pages import page_fields
from tests.support.world import World, build_world

Conn = psycopg.Connection[Any]
EXAMPLES = int(os.environ.get("PAUTA_WALK_EXAMPLES", "4"))  # drawn cases per route and role
ROLES = [None, *Role]  # None: not logged in
FORGED_HOST = "forged.example"
BOUNDARY = "pauta-walk-5b1f0c"
TOKEN = re.compile(r'name="csrf_token"[^>]*value="([^"]+)"')
# A refused log-in is counted by design (hr/throttle.py); nothing else may change.
COUNTED_EVEN_WHEN_REFUSED = ("login_throttle",)

# A megabyte costs the client and the app ~0.1 s to quote and parse, so it is sent in the
# pinned cases only (and gunicorn refuses a request line over 4 kB before any of that).
MEGA = "x" * 1_000_000
HOSTILE = [
    "\x00", "a\x00b", "\ud800", "x\udfff", "\udc80\ud800",
    str(2**63), str(2**64 + 1), "9" * 30, "9" * 5000, "-1", str(-(2**63) - 1), "0",
    "\U0001f600", "\u0661\u0662", "e\u0301", "\u202e", "\ufeff", "\uffff", "<script>", "%00",
    "../..", " ", "",
]  # fmt: skip
EXTRA = ("endpoint", "_method", "_external", "_scheme", "_anchor", "next", "cycle_id")
FILE_NAMES = ["a.csv", "a\x00.txt", "\ud800.txt", "../../etc/passwd", ""]


@dataclass(frozen=True)
class Route:
    endpoint: str
    method: str
    rule: str
    arguments: dict[str, str]  # name -> converter ("int", "string", "path", ...)
    query: tuple[str, ...]  # the query parameters the view declares
    roles: frozenset[str] | None  # who the view lets in (``@role_required``); None: anyone

    def admits(self, role: Role | None) -> bool:
        return self.roles is None or role in self.roles


@dataclass(frozen=True, repr=False)
class Case:
    path: dict[str, str]
    query: tuple[tuple[str, str], ...] = ()
    form: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str, bytes], ...] = ()
    body: str = "urlencoded"  # or "multipart", "json"
    csrf: bool = True
    forged_host: bool = False

    def __repr__(self) -> str:
        """Long values cut short: Hypothesis prints the cases it reports."""
        shown = {name: _cut(getattr(self, name)) for name in self.__dataclass_fields__}
        return f"Case({', '.join(f'{name}={value}' for name, value in shown.items())})"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _cut(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


def routes(app: Any) -> list[Route]:
    found = []
    for rule in app.url_map.iter_rules():
        view = app.view_functions[rule.endpoint]
        arguments = {
            name: converter or "string"
            for converter, name in re.findall(r"<(?:(\w+)(?:\([^)]*\))?:)?(\w+)>", rule.rule)
        }
        query = tuple(getattr(view, "query_args", ()))
        roles = getattr(view, "allowed_roles", None)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            found.append(Route(rule.endpoint, method, rule.rule, arguments, query, roles))
    return found


def form_field_names() -> list[str]:
    """The fields of every form class the app defines (and "csrf_token")."""
    names = {"csrf_token"}
    classes = list(FlaskForm.__subclasses__())
    while classes:
        form = classes.pop()
        classes.extend(form.__subclasses__())
        for klass in form.__mro__:
            names |= {key for key, value in vars(klass).items() if isinstance(value, UnboundField)}
    return sorted(names)


def wire(text: str) -> bytes:
    """What a client would send for ``text``: its UTF-8 bytes, lone surrogates included."""
    return text.encode("utf-8", "surrogatepass")


def url(route: Route, case: Case) -> str:
    path = re.sub(
        r"<(?:\w+(?:\([^)]*\))?:)?(\w+)>",
        lambda match: quote(wire(case.path[match.group(1)]), safe=""),
        route.rule,
    )
    query = urlencode([(wire(key), wire(value)) for key, value in case.query])
    return f"{path}?{query}" if query else path


def multipart(fields: list[tuple[str, str]], files: tuple[tuple[str, str, bytes], ...]) -> bytes:
    parts = [
        b'--%s\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n'
        % (BOUNDARY.encode(), wire(name), wire(value))
        for name, value in fields
    ]
    parts += [
        b'--%s\r\nContent-Disposition: form-data; name="%s"; filename="%s"\r\n'
        b"Content-Type: application/octet-stream\r\n\r\n%s\r\n"
        % (BOUNDARY.encode(), wire(name), wire(filename), content)
        for name, filename, content in files
    ]
    return b"".join(parts) + b"--%s--\r\n" % BOUNDARY.encode()


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Headers
    body: bytes


class Visitor:
    """One role's browser: sends cases straight to the WSGI app, with its session cookie (the
    test client would parse each URL of a megabyte twice more for its cookie jar), and logs in
    again when a case logged it out."""

    def __init__(self, app: Any, conn: Conn, user: Any | None) -> None:
        self.app, self.conn, self.user = app, conn, user
        self.cookie: str | None = None
        self.log_in()

    def log_in(self) -> None:
        if self.user is not None:
            client = self.app.test_client()
            login_as(client, self.user)
            self.cookie = client.get_cookie("session").value
        self.session_token = self._session_token()
        page = self.open("/login" if self.user is None else "/my/reviews").body.decode()
        token = TOKEN.search(page)
        assert token is not None, page
        self.token = token.group(1)

    def _session_token(self) -> str | None:
        if self.user is None:
            return None
        return scalar(self.conn, "SELECT session_token FROM users WHERE id = %s", self.user.id)

    def open(self, target: str, method: str = "GET", **options: Any) -> Answer:
        headers = options.pop("headers", {})
        if self.cookie:
            headers["Cookie"] = f"session={self.cookie}"
        builder = EnvironBuilder(path=target, method=method, headers=headers, **options)
        try:
            environ = builder.get_environ()
        finally:
            builder.close()
        chunks, status, answer_headers = run_wsgi_app(self.app, environ)
        try:
            body = b"".join(chunks)
        finally:
            getattr(chunks, "close", lambda: None)()
        for cookie in answer_headers.getlist("Set-Cookie"):
            name, _, rest = cookie.partition("=")
            if name == "session":
                self.cookie = rest.split(";", 1)[0] or None
        return Answer(int(status.split()[0]), answer_headers, body)

    def send(self, route: Route, case: Case) -> Answer:
        headers = {"Host": FORGED_HOST} if case.forged_host else {}
        options: dict[str, Any] = {"headers": headers}
        if route.method != "GET":
            fields = list(case.form) + ([("csrf_token", self.token)] if case.csrf else [])
            if case.body == "json":
                options["data"] = json.dumps(dict(fields))
                options["content_type"] = "application/json"
                headers.update({"X-CSRFToken": self.token} if case.csrf else {})
            elif case.body == "multipart" or case.files:
                options["data"] = multipart(fields, case.files)
                options["content_type"] = f"multipart/form-data; boundary={BOUNDARY}"
            else:
                options["data"] = urlencode([(wire(k), wire(v)) for k, v in fields])
                options["content_type"] = "application/x-www-form-urlencoded"
        return self.open(url(route, case), route.method, **options)

    def logged_out(self) -> bool:
        """Whether an accepted request (``/logout``) ended this visitor's session."""
        return self.user is not None and self._session_token() != self.session_token


def rows(world: World, argument: str) -> list[str]:
    """Values naming rows for a URL argument (``1`` for an argument the world does not know)."""
    return [str(value) for value in world.arguments.get(argument, [1])]


def values(world: World) -> st.SearchStrategy[str]:
    rows = sorted({str(value) for ids in world.arguments.values() for value in ids})
    plausible = ["1", "2026-01-01", "2026-12-31", "a@x.example", "requeue", "default", "Sales"]
    return st.one_of(
        st.sampled_from(HOSTILE),
        st.text(st.characters(), max_size=12),
        st.sampled_from(rows + plausible),
    )


def cases(
    route: Route, world: World, page: list[tuple[str, str]], names: list[str]
) -> st.SearchStrategy[Case]:
    text = values(world)
    path = st.fixed_dictionaries(
        {name: st.one_of(st.sampled_from(rows(world, name)), text) for name in route.arguments}
    )
    keys = st.one_of(st.sampled_from([*route.query, *EXTRA, *names]), text)
    pairs = st.lists(st.tuples(keys, text), max_size=4)
    fields = st.sampled_from(names + [name for name, _ in page])

    @st.composite
    def form(draw: Callable[..., Any]) -> tuple[tuple[str, str], ...]:
        """The page's own form (so that validation passes) with some fields made hostile,
        or fields of any form of the app."""
        base = list(page) if page and draw(st.booleans()) else []
        for index in draw(st.lists(st.integers(0, max(len(base) - 1, 0)), max_size=2)):
            if base:
                base[index] = (base[index][0], draw(text))
        return tuple(base + draw(st.lists(st.tuples(fields, text), max_size=3)))

    files = st.lists(
        st.tuples(fields, st.sampled_from(FILE_NAMES), st.binary(max_size=32)), max_size=2
    )
    return st.builds(
        Case,
        path=path,
        query=pairs.map(tuple),
        form=form(),
        files=files.map(tuple),
        body=st.sampled_from(["urlencoded", "multipart", "json"]),
        csrf=st.booleans(),
        forged_host=st.booleans(),
    )


def pinned(route: Route, world: World, page: list[tuple[str, str]], names: list[str]) -> list[Case]:
    """A NUL, a lone surrogate and 2**64 in every path argument, then in every query parameter
    and form field; a 1 MB string in every path argument, then in the route's first query
    parameter and every field of its page (without a CSRF token); a file in every text field;
    a JSON body of lone surrogates; the page's own form, valid, under the query keys that used
    to reach ``url_for`` and a forged ``Host``."""
    good = {name: rows(world, name)[0] for name in route.arguments}
    fields = sorted({*names, *(name for name, _ in page)} - {"csrf_token"})
    found = []
    for value in ("\x00", "\ud800", str(2**64), MEGA):
        if route.arguments:
            found.append(Case(path=dict.fromkeys(route.arguments, value)))
        keys = [*route.query, *EXTRA][: 1 if value is MEGA else None]
        form = [name for name, _ in page] if value is MEGA else fields
        found.append(Case(good, tuple((key, value) for key in keys),
                          tuple((name, value) for name in form), forged_host=True,
                          csrf=value is not MEGA))  # fmt: skip
    found.append(Case(good, form=tuple(page), files=tuple((f, "a.csv", b"x") for f in fields)))
    found.append(Case(good, form=tuple((field, "\ud800") for field in fields), body="json"))
    found.append(Case(good, tuple((key, "1") for key in EXTRA), tuple(page), forged_host=True))
    return found


@dataclass
class Walk:
    """What one role's walk has sent and seen, and the tables as the last request left them."""

    visitor: Visitor
    digest: dict[str, str]
    requests: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    routes: Counter[str] = field(default_factory=Counter)

    def check(self, route: Route, case: Case) -> None:
        answer = self.visitor.send(route, case)
        status, body = answer.status, answer.body
        self.requests += 1
        self.statuses[status] += 1
        self.routes[f"{route.method} {route.endpoint}"] += 1
        assert status < 500, f"{route.method} {route.rule}: {status}"
        if case.forged_host:
            assert FORGED_HOST not in answer.headers.get("Location", ""), route.rule
            assert FORGED_HOST.encode() not in body, route.rule
        after = table_digests(self.visitor.conn, skip=COUNTED_EVEN_WHEN_REFUSED)
        if status >= 400:
            changed = sorted(name for name in after if after[name] != self.digest.get(name))
            assert not changed, f"{route.method} {route.rule} answered {status}, wrote {changed}"
        elif self.visitor.logged_out():
            self.visitor.log_in()
            after = table_digests(self.visitor.conn, skip=COUNTED_EVEN_WHEN_REFUSED)
        self.digest = after


def more_than_a_page(conn: Conn, world: World) -> None:
    """Rows enough for every list to show its link to the next page, which is built from the
    query string."""
    for _ in range(101):
        make_job(conn, "noop", state="dead", tenant_id=world.tenant_id, error="ValueError: bad 1")
        make_job(conn, "noop", tenant_id=world.tenant_id, delay=3600)
    conn.execute(
        "INSERT INTO audit_log (user_id, action, target_type, target_id)"
        " SELECT %s, 'queue.pause', 'queue', 'default' FROM generate_series(1, 51)",
        (world.users[Role.PLATFORM_ADMIN].id,),
    )


def walker(
    walk: Walk, route: Route, drawn: st.SearchStrategy[Case], explicit: list[Case], draw: bool
) -> Callable[[], None]:
    """A Hypothesis test sending ``route`` the ``explicit`` cases, then (if ``draw``)
    ``EXAMPLES`` drawn ones, the same ones at every run."""

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
              phases=tuple(Phase) if draw else (Phase.explicit,),
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(drawn)
    def send(case: Case) -> None:
        walk.check(route, case)

    for case in explicit:
        send = example(case)(send)
    return send


@pytest.mark.parametrize("role", ROLES, ids=lambda role: role or "anonymous")
def test_no_route_answers_5xx_or_writes_when_it_refuses(
    app: Any, conn: Conn, role: Role | None
) -> None:
    started = time.monotonic()
    world = build_world(app, conn)
    more_than_a_page(conn, world)
    visitor = Visitor(app, conn, None if role is None else world.users[role])
    names = form_field_names()
    walk = Walk(visitor, table_digests(conn, skip=COUNTED_EVEN_WHEN_REFUSED))
    every = routes(app)
    explicit: dict[str, int] = {}
    for route in every:
        good = Case({name: rows(world, name)[0] for name in route.arguments})
        html = visitor.send(replace(route, method="GET"), good).body.decode(errors="replace")
        page = page_fields(html)
        form = [(name, value) for name, value in page.values if name != "csrf_token"]
        names_here = names + page.files
        fixed = pinned(route, world, form, names_here)
        explicit[f"{route.method} {route.endpoint}"] = len(fixed)
        # Where the role is turned away before the view (403, or to log in), the pinned cases
        # show the refusal holds; the drawn ones are spent where the view runs.
        drawn = cases(route, world, form, names_here)
        walker(walk, route, drawn, fixed, draw=route.admits(role))()

    assert len(every) > 40
    assert all(walk.routes[key] >= count for key, count in explicit.items())
    print(
        f"\n{role or 'anonymous'}: {walk.requests} requests over {len(every)} routes in"
        f" {time.monotonic() - started:.1f} s; statuses {dict(sorted(walk.statuses.items()))}"
    )
