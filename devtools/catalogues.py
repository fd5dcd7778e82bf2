"""The message catalogues (translations/<language>/LC_MESSAGES/messages.po): extracting the
messages from the code and templates into them, and compiling them to the .mo files that
Flask-Babel reads (docs/howto/translate.md).

    python -m devtools.catalogues update    # `make catalogues`: extract, then merge into each .po
    python -m devtools.catalogues compile   # compile each .po whose .mo is missing or older

`make run` and `make test` compile with `pybabel compile`; the tests compile here too, for a run
started straight from pytest. A fuzzy entry is not compiled (nor accepted by the tests).
"""

import sys
from pathlib import Path

from babel.messages.frontend import CommandLineInterface
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
TRANSLATIONS = ROOT / "translations"
TEMPLATE = TRANSLATIONS / "messages.pot"  # derived, not kept
# Where user-visible text lives (babel.cfg says how to read each file). Not commands/: the CLI
# speaks English.
SOURCES = ("app.py", "blueprints", "console", "hr", "models", "templates")
KEYWORDS = ("_l", "lazy_gettext", "lazy_ngettext:1,2")


def extract(template: Path = TEMPLATE) -> None:
    """Every message of the code and templates into ``template``, sorted by message and
    without source lines, so that parallel changes to the catalogues rarely conflict."""
    keywords = [argument for keyword in KEYWORDS for argument in ("-k", keyword)]
    _pybabel(
        "extract", "-F", str(ROOT / "babel.cfg"), *keywords, "--sort-output",
        "--no-location", "-o", str(template), *(str(ROOT / source) for source in SOURCES),
    )  # fmt: skip


def update(template: Path = TEMPLATE) -> None:
    """Extract, then merge into each language's .po: new messages arrive empty, dropped ones
    go, nothing is guessed (no fuzzy matching)."""
    extract(template)
    _pybabel(
        "update", "-i", str(template), "-d", str(TRANSLATIONS),
        "--no-fuzzy-matching", "--ignore-obsolete", "--ignore-pot-creation-date",
    )  # fmt: skip


def compile_stale(directory: Path = TRANSLATIONS) -> list[Path]:
    """Compile each .po whose .mo is missing or older; the .mo files written."""
    written = []
    for po in sorted(directory.glob("*/LC_MESSAGES/*.po")):
        mo = po.with_suffix(".mo")
        if mo.exists() and mo.stat().st_mtime >= po.stat().st_mtime:
            continue
        with po.open("rb") as source:
            catalogue = read_po(source, locale=po.parent.parent.name)
        with mo.open("wb") as target:
            write_mo(target, catalogue)
        written.append(mo)
    return written


def _pybabel(*arguments: str) -> None:
    CommandLineInterface().run(["pybabel", "--quiet", *arguments])


def main(argv: list[str]) -> int:
    if argv == ["update"]:
        update()
        return 0
    if argv == ["compile"]:
        for mo in compile_stale():
            print(f"compiled {mo.relative_to(ROOT)}")
        return 0
    print("usage: python -m devtools.catalogues update|compile", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
