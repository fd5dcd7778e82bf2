"""How the console writes numbers, durations and times: one place for the pages and the JSON
their live refresh reads, so a figure looks the same before and after a refresh. In the
reader's language (the request's, through Flask-Babel; English outside a request): "1,234.5"
or "1.234,5", "3 min ago" or "há 3 min". Units (ms, s, min, h, d) are the same in both."""

from datetime import UTC, datetime

from babel import Locale
from babel.numbers import format_decimal
from flask_babel import get_locale, gettext

NONE = "—"


def _locale() -> Locale:
    return get_locale() or Locale.parse("en")


def _number(value: float, pattern: str) -> str:
    return format_decimal(value, pattern, locale=_locale())


def count(value: int | None) -> str:
    return NONE if value is None else _number(value, "#,##0")


def rate(per_minute: float) -> str:
    """Jobs per minute: one decimal below 100."""
    return _number(per_minute, "#,##0" if per_minute >= 100 else "0.0")


def percent(fraction: float | None) -> str:
    if fraction is None:
        return NONE
    return f"{_number(fraction * 100, '0.0')} %"


def seconds(value: float | None) -> str:
    """A duration: 250 ms, 1.2 s, 3 min 5 s, 2 h 3 min, 3 d 4 h."""
    if value is None:
        return NONE
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{_number(value, '0.0')} s"
    whole = int(value)
    if whole < 3600:
        return _two(whole // 60, "min", whole % 60, "s")
    if whole < 86400:
        return _two(whole // 3600, "h", whole % 3600 // 60, "min")
    return _two(whole // 86400, "d", whole % 86400 // 3600, "h")


def _two(big: int, big_unit: str, small: int, small_unit: str) -> str:
    return f"{big} {big_unit}" if small == 0 else f"{big} {big_unit} {small} {small_unit}"


def utc(moment: datetime | None, with_date: bool = True) -> str:
    if moment is None:
        return NONE
    return moment.astimezone(UTC).strftime("%d %b %H:%M:%S UTC" if with_date else "%H:%M:%S UTC")


def relative(moment: datetime, now: datetime) -> str:
    """ "in 3 min" or "3 min ago", against the database's ``now``."""
    delta = (moment - now).total_seconds()
    if abs(delta) < 1:
        return gettext("now")
    if delta > 0:
        return gettext("in %(duration)s", duration=seconds(delta))
    return gettext("%(duration)s ago", duration=seconds(-delta))


PERIOD_NAMES = {1.0: "second", 60.0: "minute", 3600.0: "hour"}


def rate_text(limit: int, period_seconds: float) -> str:
    """``20 per second``, ``100 per minute``, ``3 per 90 s``, in the reader's language."""
    per = PERIOD_NAMES.get(period_seconds)
    shown = count(limit)
    if per == "second":
        return gettext("%(limit)s per second", limit=shown)
    if per == "minute":
        return gettext("%(limit)s per minute", limit=shown)
    if per == "hour":
        return gettext("%(limit)s per hour", limit=shown)
    return gettext("%(limit)s per %(period)s s", limit=shown, period=f"{period_seconds:g}")
