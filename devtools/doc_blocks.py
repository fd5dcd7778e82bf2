"""Run the code blocks of a documentation page, in order, as a reader would type them.

`python -m devtools.doc_blocks docs/quickstart.md` runs one page against the server named by
DATABASE_URL (or, unset, whatever the page's own commands find); tests/test_docs.py runs every
page of docs/quickstart.md and docs/howto/ against a fresh database; .ci/quickstart runs the
quickstart in a clean clone while `make run` runs.

By the block's language:

- ``sh``: run by bash, stopping at the first failing command. A page's ``sh`` blocks share one
  shell state (exported variables, an activated virtualenv) and start at the top of the
  repository, as typed into one terminal. Outside the virtualenv: the page must activate it.
- ``python``: run by ``python`` as found in that shell state.
- ``sql``: run on the page's database (DATABASE_URL as the shell state has it).
- ``toml``, ``ini``, ``json``, ``yaml``: parsed.
- no language: output shown to the reader, not run.

An HTML comment on the line before a block changes what is done with it:

- ``<!-- doc-test: skip: REASON -->``: not run (a shell block is still checked for syntax);
  the reason is reported. For what needs root, systemd or minutes, or what is this test.
- ``<!-- doc-test: file PATH -->``: written to PATH in the reader's project directory (on
  PYTHONPATH), as the page tells the reader to do.
- ``<!-- doc-test: background until "TEXT" -->``: a long-running command (a worker) started
  in the background, as in a second terminal; the run waits until it prints TEXT, and stops it
  with SIGTERM at the end of the page (it must exit 0).
- ``<!-- doc-test: same-as PATH -->``: must equal the repository's file PATH.
- ``<!-- doc-test: part-of PATH -->``: its lines must be lines of the repository's file PATH,
  in the same order (a file shown in part, such as an environment file).
- ``<!-- doc-test: stdin: TEXT -->``: TEXT (then a newline) is the block's standard input.
- ``<!-- doc-test: example jobs -->``: first creates the jobs the block names by number
  (1234, dead; 1235, scheduled), as a reader would pick ids from their own console.

``postgresql://me@localhost:5432/pauta`` in a block stands for the reader's database: it is
replaced by the page's DATABASE_URL.
"""

import configparser
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import yaml

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
PLACEHOLDER_URL = "postgresql://me@localhost:5432/pauta"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)
DIRECTIVE = re.compile(r"<!-- doc-test: (.+?) -->\s*$")
BACKGROUND = re.compile(r'background until "(.+)"')
# What changes the host, not the reader's project: a block that does it must be skipped, with a
# reason, or the test would run it (as root, on CI).
HOST_CHANGES = re.compile(
    r"\b(?:useradd|userdel|groupadd|systemctl|journalctl|apt-get|apt|sudo|runuser)\b"
    r"|\binstall\s+-|(?:^|\s)/(?:etc|opt|usr|var)/\S*|\bcd\s+/(?!tmp)",
    re.M,
)
EXAMPLE_JOBS = """
INSERT INTO jobs (id, tenant_id, queue, task, state, attempt, max_attempts, started_at,
                  finished_at, last_error)
SELECT example.*
FROM (VALUES (1234, 1, 'default', 'noop', 'dead', 1, 1, now(), now(), 'ValueError: an example'),
             (1235, 1, 'default', 'noop', 'available', 0, 5, NULL, NULL, NULL))
     AS example (id, tenant_id, queue, task, state, attempt, max_attempts, started_at,
                 finished_at, last_error)
WHERE NOT EXISTS (SELECT FROM jobs WHERE jobs.id = example.id);
UPDATE jobs SET available_at = now() + interval '1 hour' WHERE id = 1235 AND attempt = 0;
"""


@dataclass(frozen=True, slots=True)
class Block:
    page: Path
    line: int
    language: str
    text: str
    directive: str  # "" when the block has none

    def __str__(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line} ({self.language or 'output'})"


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        directive = DIRECTIVE.search(before)
        line = text.count("\n", 0, match.start()) + 1
        found.append(
            Block(page, line, match.group(1), match.group(2),
                  directive.group(1) if directive else "")
        )  # fmt: skip
    return found


@dataclass
class Reader:
    """One reader's terminal session: a shell state, a project directory, a database."""

    database_url: str  # replaces the placeholder; "" to leave the page's own choice
    activated: bool  # start inside the virtualenv (the how-tos assume it)
    project: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="doc-reader-")))
    background: list[tuple[Block, subprocess.Popen[str], list[str]]] = field(default_factory=list)
    skipped: list[tuple[Block, str]] = field(default_factory=list)

    @property
    def state(self) -> Path:
        return self.project / "shell-state.sh"

    def environment(self) -> dict[str, str]:
        """A fresh login shell's: the system's PATH (no virtualenv, no pyenv shims), the
        reader's project on PYTHONPATH."""
        env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
        env.update(PATH=SYSTEM_PATH, PYTHONPATH=str(self.project))
        env.pop("DATABASE_URL", None)
        if self.database_url:
            env["DATABASE_URL"] = self.database_url
        return env

    def script(self, body: str, save: bool = True) -> str:
        """Bash that restores the shell state, runs ``body`` at the top of the repository, and
        (``save``) keeps the state it leaves."""
        if self.state.exists():
            start = f". {shlex.quote(str(self.state))}"
        else:
            start = f". {shlex.quote(str(VENV_BIN / 'activate'))}" if self.activated else ":"
        keep = f"export -p > {shlex.quote(str(self.state))}\n" if save else ""
        return f"set -eo pipefail\n{start}\ncd {shlex.quote(str(ROOT))}\n{body}\n{keep}"

    def text(self, block: Block) -> str:
        if self.database_url:
            return block.text.replace(PLACEHOLDER_URL, self.database_url)
        return block.text

    def run(self, block: Block) -> None:
        directive = block.directive
        if directive.startswith("skip:"):
            self.skipped.append((block, directive.removeprefix("skip:").strip()))
            if block.language == "sh":
                self._bash(f"bash -n <<'DOC_BLOCK'\n{block.text}DOC_BLOCK", block)
            return
        if directive.startswith("file "):
            target = self.project / directive.removeprefix("file ").strip()
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.text)
            return
        if directive.startswith("same-as "):
            original = (ROOT / directive.removeprefix("same-as ").strip()).read_text()
            _check(block.text == original, f"{block} differs from {directive}")
            return
        if directive.startswith("part-of "):
            original = (ROOT / directive.removeprefix("part-of ").strip()).read_text()
            lines = iter(original.splitlines())
            missing = [line for line in block.text.splitlines() if line not in lines]
            _check(not missing, f"{block} has lines not in {directive}, in order: {missing}")
            return
        if directive == "example jobs":
            self._execute(EXAMPLE_JOBS)
        if (background := BACKGROUND.fullmatch(directive)) is not None:
            self._start(block, background.group(1))
            return
        getattr(self, f"_{block.language or 'output'}")(block)

    def _sh(self, block: Block) -> None:
        change = HOST_CHANGES.search(block.text)
        _check(change is None, f"{block} would change this host ({change and change.group(0)!r}):"
               " mark it <!-- doc-test: skip: REASON -->")  # fmt: skip
        stdin = ""
        if block.directive.startswith("stdin:"):
            stdin = block.directive.removeprefix("stdin:").strip() + "\n"
        self._bash(self.text(block), block, stdin)

    def _python(self, block: Block) -> None:
        self._bash(f"python - <<'DOC_BLOCK'\n{self.text(block)}DOC_BLOCK", block)

    def _sql(self, block: Block) -> None:
        self._execute(self.text(block))

    def _execute(self, sql: str) -> None:
        """On the database the reader's shell names (DATABASE_URL in its state)."""
        url = self._bash('printf %s "$DATABASE_URL"', None, save=False)
        _check(bool(url), "the page runs SQL before it has set DATABASE_URL")
        try:
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute(sql.encode())
        except psycopg.Error as error:
            raise DocBlockFailed(f"{sql}\nfailed: {error}") from error

    def _toml(self, block: Block) -> None:
        tomllib.loads(block.text)

    def _ini(self, block: Block) -> None:
        configparser.ConfigParser(interpolation=None, strict=True).read_string(block.text)

    def _json(self, block: Block) -> None:
        json.loads(block.text)

    def _yaml(self, block: Block) -> None:
        yaml.safe_load(block.text)

    def _output(self, block: Block) -> None:
        """Shown to the reader, not run."""

    def _bash(self, body: str, block: Block | None, stdin: str = "", save: bool = True) -> str:
        done = subprocess.run(["bash", "-c", self.script(body, save)], env=self.environment(),
                              input=stdin, capture_output=True, text=True, timeout=300)  # fmt: skip
        _check(
            done.returncode == 0,
            f"{block} failed with {done.returncode}:\n{body}\n--- stdout\n{done.stdout}"
            f"--- stderr\n{done.stderr}",
        )
        return done.stdout

    def _start(self, block: Block, until: str) -> None:
        command = self.text(block).strip()
        process = subprocess.Popen(
            ["bash", "-c", self.script(f"exec {command}")], env=self.environment(),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        lines: list[str] = []
        threading.Thread(target=_collect, args=(process, lines), daemon=True).start()
        self.background.append((block, process, lines))
        deadline = time.monotonic() + 120
        while not any(until in line for line in lines):
            _check(
                process.poll() is None and time.monotonic() < deadline,
                f"{block} never printed {until!r}:\n" + "\n".join(lines),
            )
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop what runs in the background, as Ctrl-C in its terminal would; each exits 0."""
        for block, process, lines in self.background:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            code = process.wait(90)
            _check(code == 0, f"{block} exited with {code}:\n" + "\n".join(lines))


class DocBlockFailed(AssertionError):
    """A block did not run as the page says it does."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise DocBlockFailed(message)


def _collect(process: subprocess.Popen[str], lines: list[str]) -> None:
    if process.stdout is None:
        return
    with process.stdout:
        lines.extend(line.rstrip("\n") for line in process.stdout)


@contextmanager
def reading(database_url: str, activated: bool) -> Iterator[Reader]:
    reader = Reader(database_url, activated)
    try:
        yield reader
    finally:
        for _, process, _ in reader.background:
            if process.poll() is None:
                process.kill()
                process.wait()


def run_page(page: Path, database_url: str, activated: bool) -> list[tuple[Block, str]]:
    """Run every block of ``page`` in order; the blocks skipped, with their reasons."""
    with reading(database_url, activated) as reader:
        for block in blocks(page):
            reader.run(block)
        reader.stop()
        return reader.skipped


def main(pages: list[str]) -> int:
    for page in pages:
        quickstart = Path(page).name == "quickstart.md"
        skipped = run_page(Path(page).resolve(), "", activated=not quickstart)
        print(f"{page}: every block ran", *(f"  skipped {b}: {why}" for b, why in skipped),
              sep="\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
