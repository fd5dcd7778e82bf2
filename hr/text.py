"""Checks on short texts people type (a cycle's name, an employee's name or department).

Such a text lands in e-mail headers, CSV reports and single-line page elements, so it must be
one line: no control character (CR, LF, tab, NUL...) and no line or paragraph separator
(U+2028, U+2029), all of which Python's e-mail package refuses in a header.
"""

import unicodedata

NOT_ONE_LINE = ("Cc", "Zl", "Zp")  # Unicode categories: control, line and paragraph separators


def is_one_line(text: str) -> bool:
    return not any(unicodedata.category(character) in NOT_ONE_LINE for character in text)
