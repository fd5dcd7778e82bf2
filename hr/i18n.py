"""Translation for HR code that runs in the worker as well as in the web app, without Flask
(the worker does not import it; tests/hr/test_tasks.py holds it so).

``gettext`` and ``ngettext`` translate into the language set by ``speaking(locale)`` (the
worker, writing to a reviewer in theirs); else, in the web app, the request's language
(Flask-Babel's, when it is loaded); else English, as the CLI speaks. ``N_`` marks a text for
extraction where it is defined, to be translated where it is shown.
"""

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import date
from functools import cache
from pathlib import Path
from typing import Any

from babel import Locale
from babel.dates import format_date
from babel.numbers import format_decimal
from babel.support import NullTranslations, Translations

TRANSLATIONS = Path(__file__).resolve().parent.parent / "translations"
ENGLISH = "en"

_spoken: ContextVar[str | None] = ContextVar("hr_i18n_locale", default=None)


@cache
def catalogue(locale: str) -> NullTranslations:
    """The compiled catalogue of ``locale`` (English: the text of the code)."""
    if locale == ENGLISH:
        return NullTranslations()
    return Translations.load(str(TRANSLATIONS), [locale])


@contextmanager
def speaking(locale: str) -> Iterator[None]:
    """Translate into ``locale`` inside the block (this thread or task only)."""
    token = _spoken.set(locale)
    try:
        yield
    finally:
        _spoken.reset(token)


def current_locale() -> str:
    spoken = _spoken.get()
    if spoken is not None:
        return spoken
    babel = sys.modules.get("flask_babel")
    found = babel.get_locale() if babel is not None else None
    return str(found) if found is not None else ENGLISH


def _translations() -> Any:
    spoken = _spoken.get()
    if spoken is not None:
        return catalogue(spoken)
    babel = sys.modules.get("flask_babel")
    return babel.get_translations() if babel is not None else NullTranslations()


def gettext(text: str, **variables: Any) -> str:
    translated: str = _translations().ugettext(text)
    return translated % variables if variables else translated


def ngettext(singular: str, plural: str, num: int, **variables: Any) -> str:
    variables.setdefault("num", num)
    translated: str = _translations().ungettext(singular, plural, num)
    return translated % variables


def translate(text: str) -> str:
    """``text`` translated, not formatted: for Jinja's i18n extension, which formats."""
    translated: str = _translations().ugettext(text)
    return translated


def translate_plural(singular: str, plural: str, num: int) -> str:
    translated: str = _translations().ungettext(singular, plural, num)
    return translated


def N_(text: str) -> str:
    return text


# How a day is written: (short, long) date patterns by language.
DAY_PATTERNS = {
    "pt_BR": ("dd/MM/yyyy", "EEEE, d 'de' MMMM 'de' yyyy"),
    "en": ("dd MMM yyyy", "EEEE d MMMM yyyy"),
}


def format_day(value: date, long: bool = False) -> str:
    """ "15/07/2026" or "quarta-feira, 15 de julho de 2026"; "15 Jul 2026" or "Wednesday 15
    July 2026"."""
    locale = current_locale()
    short_pattern, long_pattern = DAY_PATTERNS.get(locale, DAY_PATTERNS[ENGLISH])
    pattern = long_pattern if long else short_pattern
    return format_date(value, pattern, locale=Locale.parse(locale))


def format_number(value: int | float) -> str:
    """``value`` with the reader's digit grouping: 10,485,760 in English, 10.485.760 in pt_BR."""
    return format_decimal(value, "#,##0.###", locale=Locale.parse(current_locale()))
