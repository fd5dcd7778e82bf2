"""Every page of every route, rendered with a pseudo-locale in which each translation is its
English text between ⟦ and ⟧: whatever the reader would see that is not between markers, nor
data (names, e-mails, queues, tasks, errors...), nor a number, date or unit, was written outside
a translation call and would stay English in Portuguese. The test names the route and the
words.
"""

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import psycopg
import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from app import create_app
from devtools.catalogues import TRANSLATIONS
from models import db
from models.people import Role
from tests.support.english import in_english
from tests.support.factories import login_as
from tests.support.world import World, build_world

OPEN, CLOSE = "⟦", "⟧"
MARKED = re.compile(f"{OPEN}[^{OPEN}{CLOSE}]*{CLOSE}")
WORD = re.compile(r"[A-Za-zÀ-ÿ]{2,}")
# Not Pauta's wording: the product's name, the languages of the switch (named in themselves),
# units, and Babel's month and weekday names.
ALLOWED = {"Pauta", "Português", "Brasil", "English", "ms", "min", "UTC", "CSV"}
SKIPPED_TAGS = {"script", "style", "code", "pre", "time", "template", "option"}
ATTRIBUTES = ("title", "aria-label", "placeholder", "data-confirm", "data-confirm-detail",
              "data-confirm-button")  # fmt: skip
DATA_QUERIES = (
    "SELECT name FROM employees UNION SELECT email FROM employees UNION SELECT department "
    "FROM employees UNION SELECT name FROM users UNION SELECT email FROM users UNION SELECT name "
    "FROM tenants UNION SELECT slug FROM tenants UNION SELECT name FROM review_cycles "
    "UNION SELECT queue FROM jobs UNION SELECT task FROM jobs UNION SELECT last_error FROM jobs "
    "WHERE last_error IS NOT NULL UNION SELECT payload::text FROM jobs UNION SELECT name FROM "
    "workers UNION SELECT hostname FROM workers UNION SELECT error FROM job_attempts WHERE error "
    "IS NOT NULL UNION SELECT name FROM workflow_executions UNION SELECT name FROM "
    "operation_outputs UNION SELECT key FROM workflow_waits WHERE key IS NOT NULL"
)


class Reader(HTMLParser):
    """The text a reader sees, and the attributes a browser shows or reads out."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in SKIPPED_TAGS:
            self.skipping += 1
        for name, value in attrs:
            if name in ATTRIBUTES and value:
                self.texts.append(value)
        kinds = dict(attrs)
        if tag == "input" and kinds.get("type") in ("submit", "button") and kinds.get("value"):
            self.texts.append(kinds["value"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in SKIPPED_TAGS and self.skipping:
            self.skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.texts.append(data)


def unmarked_words(html: str, data: list[str]) -> set[str]:
    reader = Reader()
    reader.feed(html)
    text = " ".join(reader.texts)
    while MARKED.search(text):
        text = MARKED.sub(" ", text)
    for value in data:
        text = text.replace(value, " ")
    return {word for word in WORD.findall(text) if word not in ALLOWED}


@pytest.fixture
def pseudo_app(database_url: str, tmp_path: Path) -> Any:
    """The app, its pt_BR catalogue replaced by the pseudo-locale."""
    with (TRANSLATIONS / "pt_BR" / "LC_MESSAGES" / "messages.po").open("rb") as source:
        catalogue = read_po(source, locale="pt_BR")
    for message in catalogue:
        if message.id:
            ids = message.id if isinstance(message.id, tuple) else (message.id,)
            marked = tuple(f"{OPEN}{text}{CLOSE}" for text in ids)
            message.string = marked if isinstance(message.id, tuple) else marked[0]
    target = tmp_path / "pt_BR" / "LC_MESSAGES"
    target.mkdir(parents=True)
    with (target / "messages.mo").open("wb") as compiled:
        write_mo(compiled, catalogue)
    application = create_app(
        {
            "DATABASE_URL": database_url,
            "SECRET_KEY": "test",
            "TESTING": True,
            "BABEL_TRANSLATION_DIRECTORIES": str(tmp_path),
        }
    )
    yield in_english(application)
    with application.app_context():
        db.engine.dispose()


def pages(app: Any, world: World) -> list[tuple[str, str]]:
    """(endpoint, path) of every GET route, with arguments naming rows of the world."""
    found = []
    for rule in app.url_map.iter_rules():
        if "GET" not in (rule.methods or ()) or rule.endpoint == "static":
            continue
        paths = [rule.rule]
        for name in rule.arguments:
            paths = [
                re.sub(rf"<(?:\w+:)?{name}>", str(value), path)
                for path in paths
                for value in world.arguments.get(name, [])
            ]
        found += [(rule.endpoint, path) for path in paths]
    return found


def test_every_page_says_only_translated_text(
    pseudo_app: Any, conn: psycopg.Connection[Any]
) -> None:
    world = build_world(pseudo_app, conn)
    data = sorted({row[0] for row in conn.execute(DATA_QUERIES) if row[0]}, key=len, reverse=True)
    data += [word for value in data for word in re.split(r"[\s,.:;()'\"]+", value) if word]
    left: dict[str, set[str]] = {}
    checked = 0
    for role in [None, *Role]:
        client = pseudo_app.test_client()
        client.environ_base["HTTP_ACCEPT_LANGUAGE"] = "pt-BR"
        if role is not None:
            login_as(client, world.users[role])
        for endpoint, path in pages(pseudo_app, world):
            response = client.get(path)
            assert response.status_code < 500, path
            if response.mimetype != "text/html" or 300 <= response.status_code < 400:
                continue
            checked += 1
            words = unmarked_words(response.get_data(as_text=True), data)
            if words:
                left.setdefault(endpoint, set()).update(words)
    assert checked > 40
    assert {endpoint: sorted(words) for endpoint, words in left.items()} == {}


def test_the_check_finds_text_written_outside_a_translation_call() -> None:
    html = (
        "<h1>⟦Review cycles⟧</h1><p>⟦Period ⟦01/12/2026⟧ \u2013 02/12/2026⟧ Ana Berg</p>"
        "<p title='Stray title'>12 min</p><code>python worker.py</code><p>Left behind</p>"
    )
    assert unmarked_words(html, ["Ana Berg"]) == {"Stray", "title", "Left", "behind"}
