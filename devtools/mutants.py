"""`make mutants`: break the engine on purpose, one named mutant at a time, and demand that the
tests named for it fail.

Each mutant in tests/mutants.toml names a file, an exact text in it (which must occur exactly
``occurrences`` times, 1 by default), its replacement, and the tests that must kill it. The run
copies the working tree once into a scratch folder, checks that every named test passes there
unmutated (the baseline), then applies each mutant alone, runs its tests and restores the file.
It prints one line per mutant and exits 1 if the baseline fails, if a mutant's text is not
found as given, or if any mutant survives; mutmut's blind spots (SQL in string files, code run
only in worker.py subprocesses) are why the mutants are written by hand.

    make mutants                          # every mutant
    make mutants MUTANTS=finish-fence     # those whose id starts with this
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "tests" / "mutants.toml"
SKIPPED = (".git", ".venv", ".venv-bench", "node_modules", "var", "test-artifacts", "mutants")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    old: str
    new: str
    tests: tuple[str, ...]
    occurrences: int = 1
    why: str = ""


def load(path: Path) -> list[Mutant]:
    document = tomllib.loads(path.read_text())
    mutants = [
        Mutant(
            id=entry["id"],
            file=entry["file"],
            old=entry["old"],
            new=entry["new"],
            tests=tuple(entry["tests"]),
            occurrences=int(entry.get("occurrences", 1)),
            why=entry.get("why", ""),
        )
        for entry in document["mutant"]
    ]
    ids = [mutant.id for mutant in mutants]
    duplicated = {mutant_id for mutant_id in ids if ids.count(mutant_id) > 1}
    if duplicated:
        raise SystemExit(f"mutants.toml: ids listed twice: {', '.join(sorted(duplicated))}")
    return mutants


def pytest(tree: Path, tests: tuple[str, ...], timeout: float) -> tuple[bool, str]:
    """Run ``tests`` in ``tree``; returns (passed, the last lines of the output)."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    try:
        done = subprocess.run(
            command, cwd=tree, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return False, "timed out"
    lines = (done.stdout + done.stderr).strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED tests/", "ERROR tests/"))]
    return done.returncode == 0, (failed[0] if failed else lines[-1] if lines else "")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make mutants", description=__doc__)
    parser.add_argument("prefix", nargs="?", default="", help="only mutants whose id starts so")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per test run")
    arguments = parser.parse_args(argv)
    mutants = [m for m in load(CATALOGUE) if m.id.startswith(arguments.prefix)]
    if not mutants:
        print(f"no mutant id starts with {arguments.prefix!r}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pauta-mutants-") as scratch:
        tree = Path(scratch) / "tree"
        shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*SKIPPED, "__pycache__"))
        every_test = tuple(sorted({test for mutant in mutants for test in mutant.tests}))
        started = time.monotonic()
        passed, detail = pytest(tree, every_test, arguments.timeout * 3)
        if not passed:
            print(f"baseline: the named tests fail without any mutant ({detail})")
            return 1
        print(
            f"baseline: {len(every_test)} tests pass unmutated ({time.monotonic() - started:.0f} s)"
        )
        survivors = []
        for mutant in mutants:
            path = tree / mutant.file
            original = path.read_text()
            found = original.count(mutant.old)
            if found != mutant.occurrences:
                print(
                    f"{mutant.id:<36} NOT APPLIED: its text occurs {found} times in {mutant.file}"
                )
                survivors.append(mutant.id)
                continue
            path.write_text(original.replace(mutant.old, mutant.new))
            try:
                started = time.monotonic()
                passed, detail = pytest(tree, mutant.tests, arguments.timeout)
            finally:
                path.write_text(original)
            took = time.monotonic() - started
            if passed:
                survivors.append(mutant.id)
                print(f"{mutant.id:<36} SURVIVED ({took:.0f} s): {mutant.why}")
            else:
                print(f"{mutant.id:<36} killed ({took:.0f} s) by {detail}")
    killed = len(mutants) - len(survivors)
    print(f"{killed} of {len(mutants)} mutants killed")
    if survivors:
        print("survivors: " + ", ".join(survivors))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
