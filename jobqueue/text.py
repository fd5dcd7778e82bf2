"""Text a task produces (error messages, tracebacks), made safe to store and to show.

PostgreSQL's ``text`` cannot hold NUL, and UTF-8 cannot encode an unpaired surrogate, so either
one in an exception's message made the whole batch of results fail to write. Both are replaced
by U+FFFD. A message or a traceback is also cut to a size in bytes (UTF-8, as stored), with a
marker saying how much was cut: a task raising with a 5 MB message must not put 5 MB into a
row that the console reads and shows.

E-mail addresses are masked (``gabriel.souza@demo.example`` -> ``g***@demo.example``): an SMTP
server's reply quoting the recipient, or any exception naming a person's address, would
otherwise put personal data into ``jobs.last_error`` and ``job_attempts``, which operators read
and which outlive the person's record (see docs/reference/personal-data.md).
"""

import re
from dataclasses import dataclass

DEFAULT_ERROR_MAX_BYTES = 2 * 1024
DEFAULT_TRACEBACK_MAX_BYTES = 32 * 1024
REPLACEMENT = "\ufffd"
MINIMUM_MAX_BYTES = 64  # room for the marker and something of the text

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The local part's first character is kept; the rest of it becomes ***. A masked address no
# longer matches ('*' is not a local-part character here), so masking twice changes nothing.
_ADDRESS = re.compile(
    r"(?<![A-Za-z0-9._%+-])([A-Za-z0-9_%+-])[A-Za-z0-9._%+-]*@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)"
)


@dataclass(frozen=True, slots=True)
class TextLimits:
    """The most bytes an attempt's error message and traceback may take when stored."""

    error_bytes: int = DEFAULT_ERROR_MAX_BYTES
    traceback_bytes: int = DEFAULT_TRACEBACK_MAX_BYTES


def unstorable(text: str) -> bool:
    """True when ``text`` holds a character PostgreSQL text cannot store (NUL, a surrogate)."""
    return _UNSTORABLE.search(text) is not None


def clean(text: str) -> str:
    """``text`` with every NUL and unpaired surrogate replaced by U+FFFD."""
    return _UNSTORABLE.sub(REPLACEMENT, text)


def mask_addresses(text: str) -> str:
    """``text`` with every e-mail address masked to its first character and its domain."""
    return _ADDRESS.sub(r"\1***@\2", text)


def cut_end(text: str, max_bytes: int) -> str:
    """Clean ``text``, mask its e-mail addresses and keep its beginning within ``max_bytes``,
    saying how much was cut."""
    text = mask_addresses(clean(text))
    if len(text) * 4 <= max_bytes:  # UTF-8 takes at most 4 bytes a character
        return text
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    kept = max_bytes - len(_cut_marker(len(encoded)).encode())
    head = encoded[: max(kept, 0)].decode(errors="ignore")
    return head + _cut_marker(len(encoded) - len(head.encode()))


def cut_middle(text: str, max_bytes: int) -> str:
    """Clean ``text``, mask its e-mail addresses and keep its beginning and its end within
    ``max_bytes`` (a traceback's first frames and the exception at its foot), saying how much
    was cut between them."""
    text = mask_addresses(clean(text))
    if len(text) * 4 <= max_bytes:
        return text
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text
    kept = max(max_bytes - len(_gap_marker(len(encoded)).encode()), 0)
    head = encoded[: kept // 2].decode(errors="ignore")
    tail = encoded[len(encoded) - (kept - kept // 2) :].decode(errors="ignore")
    cut = len(encoded) - len(head.encode()) - len(tail.encode())
    return head + _gap_marker(cut) + tail


def _cut_marker(cut: int) -> str:
    return f" [... {cut:,} more bytes cut]"


def _gap_marker(cut: int) -> str:
    return f"\n[... {cut:,} bytes cut ...]\n"
