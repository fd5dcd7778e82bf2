"""The message catalogues: every message of the code and templates has its Brazilian Portuguese
translation (not fuzzy, not empty, the same placeholders), the catalogues hold exactly what the
code says today (`make catalogues` was run), and plurals follow each language's rule."""

import re
from pathlib import Path
from typing import Any

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po
from flask_babel import force_locale, ngettext

from devtools.catalogues import TRANSLATIONS, extract

PLACEHOLDER = re.compile(r"%\((\w+)\)[sd]|%[sd]")


def catalogue(language: str) -> Catalog:
    with (TRANSLATIONS / language / "LC_MESSAGES" / "messages.po").open("rb") as source:
        return read_po(source, locale=language)


@pytest.fixture(scope="module")
def extracted(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    template = tmp_path_factory.mktemp("catalogue") / "messages.pot"
    extract(template)
    with template.open("rb") as source:
        return read_po(source)


def key(message: Any) -> str:
    return message.id[0] if isinstance(message.id, tuple) else message.id


def test_extraction_finds_the_pages_and_the_e_mails(extracted: Catalog) -> None:
    """A template the extractor cannot parse would be skipped: some message of each kind of
    source must be there."""
    ids = {key(message) for message in extracted if message.id}
    assert {"Review cycles", "Log in", "The e-mail or the password is wrong."} <= ids


@pytest.mark.parametrize("language", ["pt_BR", "en"])
def test_each_catalogue_holds_exactly_the_messages_of_the_code(
    extracted: Catalog, language: str
) -> None:
    in_code = {message.id for message in extracted if message.id}
    kept = {message.id for message in catalogue(language) if message.id}
    assert sorted(map(str, in_code - kept)) == [], "run `make catalogues`"
    assert sorted(map(str, kept - in_code)) == [], "run `make catalogues`"


def test_every_message_has_a_brazilian_translation() -> None:
    brazilian = catalogue("pt_BR")
    assert not brazilian.fuzzy
    assert brazilian.num_plurals == 2
    problems = []
    for message in brazilian:
        if not message.id:
            continue
        sources = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        if message.fuzzy:
            problems.append(f"fuzzy: {key(message)!r}")
        if len(strings) != 2 if isinstance(message.id, tuple) else not strings[0]:
            problems.append(f"plural forms missing: {key(message)!r}")
        for text in strings:
            if not text:
                problems.append(f"not translated: {key(message)!r}")
            elif set(PLACEHOLDER.findall(text)) != set(PLACEHOLDER.findall(sources[0])):
                problems.append(f"placeholders differ: {key(message)!r} -> {text!r}")
    assert problems == []


def test_english_keeps_the_text_of_the_code() -> None:
    """The code's text is English: an English msgstr would only drift from it."""
    assert [key(m) for m in catalogue("en") if m.id and any(_strings(m))] == []


def _strings(message: Any) -> tuple[str, ...]:
    return message.string if isinstance(message.string, tuple) else (message.string,)


@pytest.mark.parametrize(
    ("language", "one", "two"),
    [("pt_BR", "1 minuto.", "2 minutos."), ("en", "1 minute.", "2 minutes.")],
)
def test_plurals_follow_the_language(app: Any, language: str, one: str, two: str) -> None:
    singular = "Too many failed log-ins for this e-mail address or from your network. " + (
        "Try again in %(num)d minute."
    )
    plural = singular.replace("minute.", "minutes.")
    with app.test_request_context(), force_locale(language):
        assert ngettext(singular, plural, 1).endswith(" " + one)
        assert ngettext(singular, plural, 2).endswith(" " + two)


def test_the_compiled_catalogues_are_not_kept() -> None:
    ignored = (Path(__file__).parent.parent / ".gitignore").read_text()
    assert "translations/*/LC_MESSAGES/*.mo" in ignored
