"""The documentation runs: every code block and command of the quickstart and the how-tos, in
order, as a reader would type them into one terminal, against a fresh database (see
devtools/doc_blocks.py for what is done with each kind of block). The quickstart starts outside
the virtualenv, as a reader does; the how-tos start inside it, as the quickstart leaves them."""

from pathlib import Path

import pytest

from devtools.doc_blocks import ROOT, DocBlockFailed, blocks, run_page

PAGES = [ROOT / "docs" / "quickstart.md", *sorted((ROOT / "docs" / "howto").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_block_of_the_page_runs(page: Path, database_url: str) -> None:
    assert [block for block in blocks(page) if block.language]  # the page has code to run
    skipped = run_page(page, database_url, activated=page.name != "quickstart.md")
    assert all(reason for _, reason in skipped), skipped  # each skip says why


def test_a_block_that_does_not_run_as_written_fails_the_page(
    tmp_path: Path, database_url: str
) -> None:
    cases = {
        "a failing command": "```sh\nflask --app app jobs requeue 999999\n```\n",
        "a command outside the virtualenv": "```sh\nflask --app app jobs stats\n```\n",
        "a copy that drifted": "<!-- doc-test: same-as Makefile -->\n```ini\n[x]\n```\n",
        "a part out of order": "<!-- doc-test: part-of deploy/systemd/pauta.env.example -->\n"
        "```sh\nPAUTA_TASK_MODULES=hr.tasks\nDATABASE_URL=postgresql://x\n```\n",
        "a worker that never says it": '<!-- doc-test: background until "never" -->\n'
        "```sh\npython worker.py --queues welcome=1 --connect-wait 0 --no-such-flag\n```\n",
        "bad SQL": "```sql\nSELECT * FROM no_such_table;\n```\n",
        "a change to the host without a skip": "```sh\nuseradd --help >/dev/null\n```\n",
    }
    for name, markdown in cases.items():
        page = tmp_path / f"{name.replace(' ', '-')}.md"
        page.write_text(markdown)
        with pytest.raises(DocBlockFailed):
            run_page(page, database_url, activated="outside" not in name)
