"""The fields of the forms on a page, read from its HTML as a browser would fill them in."""

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class PageFields:
    values: list[tuple[str, str]] = field(default_factory=list)  # what a plain submit sends
    files: list[str] = field(default_factory=list)  # names of file inputs


def page_fields(html: str) -> PageFields:
    """Every named input, select, textarea and button of ``html``, with the value a browser
    would submit (a radio group's first choice when none is checked; every checkbox ticked)."""
    parser = _FormReader()
    parser.feed(html)
    return parser.found


class _FormReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found = PageFields()
        self._radios: set[str] = set()
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {name: value or "" for name, value in attrs}
        name = attributes.get("name", "")
        if tag == "option" and self._select is not None:
            self.found.values.append((self._select, attributes.get("value", "")))
            self._select = None  # the first option stands for the select
        elif not name:
            return
        elif tag == "select":
            self._select = name
        elif tag == "textarea":
            self._textarea = name
        elif tag in ("input", "button"):
            kind = attributes.get("type", "text")
            if kind == "file":
                self.found.files.append(name)
            elif kind != "radio" or name not in self._radios:
                self.found.values.append((name, attributes.get("value", "")))
                if kind == "radio":
                    self._radios.add(name)

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self.found.values.append((self._textarea, data))
            self._textarea = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea" and self._textarea is not None:
            self.found.values.append((self._textarea, ""))
            self._textarea = None
