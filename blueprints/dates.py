"""Dates, times and numbers in the reader's language and time zone (Babel's formatters, through
Flask-Babel), as template filters (the console's relative ages, "há 3 min", are
console.formatting's):

- ``day``: a date, "01/12/2026" in pt_BR, "Dec 1, 2026" in English; ``long_day`` with the
  weekday, "terça-feira, 1 de dezembro de 2026";
- ``moment``: a point in time in the reader's time zone, "01/12/2026 14:05", inside a
  ``<time>`` element whose title gives it in UTC (for operators comparing with logs);
  ``moment(seconds=True)`` adds the seconds, ``moment(date=False)`` leaves the date out;
- ``number``: "1.234,5" in pt_BR, "1,234.5" in English.
"""

from datetime import UTC, date, datetime

from flask import Flask
from flask_babel import format_date, format_datetime, format_decimal, get_locale
from markupsafe import Markup

NONE = "—"


def init_app(app: Flask) -> None:
    app.add_template_filter(day)
    app.add_template_filter(long_day)
    app.add_template_filter(moment)
    app.add_template_filter(number)


def _numeric() -> bool:
    """Brazilian readers read dates as numbers (dd/MM/yyyy); English readers by month name,
    which no one reads the wrong way round."""
    return str(get_locale()) == "pt_BR"


def day(value: date | None) -> str:
    if value is None:
        return NONE
    return format_date(value, "dd/MM/yyyy" if _numeric() else "medium")


def long_day(value: date | None) -> str:
    return NONE if value is None else format_date(value, "full")


def moment_text(value: datetime, seconds: bool = False, date: bool = True) -> str:
    """``value`` in the reader's time zone, as text."""
    clock = "HH:mm:ss" if seconds else "HH:mm"
    if not date:
        return format_datetime(value, clock)
    days = "dd/MM/yyyy" if _numeric() else "MMM d, yyyy"
    return format_datetime(value, f"{days} {clock}")


def moment(value: datetime | None, seconds: bool = False, date: bool = True) -> Markup | str:
    if value is None:
        return NONE
    in_utc = value.astimezone(UTC)
    return Markup('<time datetime="{}" title="{} UTC">{}</time>').format(
        in_utc.isoformat(timespec="seconds").replace("+00:00", "Z"),
        in_utc.strftime("%Y-%m-%d %H:%M:%S"),
        moment_text(value, seconds, date),
    )


def number(value: float | None, digits: int = 0) -> str:
    if value is None:
        return NONE
    pattern = "#,##0" + ("." + "0" * digits if digits else "")
    return format_decimal(value, pattern)
