"""tests/mutants.toml stays applicable: each mutant's text is found in its file as many times as
the catalogue says, and its tests exist. A change that rewrites the code a mutant breaks (a
renamed column, a moved line) otherwise leaves the mutant unable to apply, and the test it was
written for unguarded, until someone runs `make mutants`; three such mutants were found stale
on 2026-12-02."""

from pathlib import Path

import pytest

from devtools.mutants import CATALOGUE, ROOT, Mutant, load

MUTANTS = load(CATALOGUE)


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.id for mutant in MUTANTS])
def test_each_mutant_applies_to_todays_code(mutant: Mutant) -> None:
    text = (ROOT / mutant.file).read_text()
    assert text.count(mutant.old) == mutant.occurrences, (
        f"{mutant.id}: its text occurs {text.count(mutant.old)} times in {mutant.file}, "
        f"not {mutant.occurrences}; point it at the code it breaks today"
    )
    assert mutant.new != mutant.old


@pytest.mark.parametrize("mutant", MUTANTS, ids=[mutant.id for mutant in MUTANTS])
def test_each_mutants_tests_exist(mutant: Mutant) -> None:
    for test in mutant.tests:
        path, _, name = test.partition("::")
        assert Path(ROOT / path).exists(), f"{mutant.id}: no file {path}"
        if name:
            function = name.split("[")[0]
            assert f"def {function}(" in (ROOT / path).read_text(), f"{mutant.id}: no {test}"
