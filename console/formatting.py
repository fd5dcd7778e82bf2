"""How the console writes numbers, durations and times: one place for the pages and the JSON
their live refresh reads, so a figure looks the same before and after a refresh."""

from datetime import UTC, datetime

NONE = "—"


def count(value: int | None) -> str:
    return NONE if value is None else f"{value:,}"


def plural(value: int, noun: str, nouns: str | None = None) -> str:
    """ "1 job", "2 jobs", "1,200 processes": the count with its noun, singular only for one."""
    return f"{count(value)} {noun if value == 1 else (nouns or noun + 's')}"


def rate(per_minute: float) -> str:
    """Jobs per minute: one decimal below 100."""
    return f"{per_minute:,.0f}" if per_minute >= 100 else f"{per_minute:.1f}"


def percent(fraction: float | None) -> str:
    if fraction is None:
        return NONE
    return f"{fraction * 100:.1f} %"


def seconds(value: float | None) -> str:
    """A duration: 250 ms, 1.2 s, 3 min 5 s, 2 h 3 min, 3 d 4 h."""
    if value is None:
        return NONE
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 60:
        return f"{value:.1f} s"
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
        return "now"
    return f"in {seconds(delta)}" if delta > 0 else f"{seconds(-delta)} ago"


PERIOD_NAMES = {1.0: "second", 60.0: "minute", 3600.0: "hour"}


def rate_text(limit: int, period_seconds: float) -> str:
    """``20 per second``, ``100 per minute``, ``3 per 90 s``."""
    per = PERIOD_NAMES.get(period_seconds)
    return f"{limit} per {per}" if per else f"{limit} per {period_seconds:g} s"
