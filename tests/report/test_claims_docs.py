"""The generated verdict blocks at the end of docs/papers/<paper>.md equal what the claims report
computes now from the committed collected results (python -m benchlib.commands.claims_docs)."""

from __future__ import annotations

import pytest
from conftest import REPO

from benchlib.commands.claims_docs import END, RUNS, block, current_block, with_block


@pytest.mark.parametrize("paper", sorted(RUNS))
def test_paper_page_block_is_current(paper: str) -> None:
    text = (REPO / "docs" / "papers" / f"{paper}.md").read_text()
    assert current_block(text) == block(REPO, paper), (
        f"docs/papers/{paper}.md: its claims block is out of date; run "
        "python -m benchlib.commands.claims_docs"
    )
    assert text.rstrip("\n").endswith(END)  # appended at the very end of the page


def test_demo_block_numbers() -> None:
    """The demo's L1 row as the report kind's own test recomputes it by hand."""
    text = current_block((REPO / "docs" / "papers" / "lightyear.md").read_text())
    row = next(line for line in text.splitlines() if line.startswith("| L1 | supported"))
    assert "| 27.69 [16.35, 39.91] points | 6e-05 (0.00036) | 28 | 15.73 | 9.06: 3 |" in row
    assert "Missing cells: 60; diverged cells: 0" in text  # the sample's golden: ANA, SFA only


def test_with_block_replaces_or_appends() -> None:
    new = block(REPO, "fedagain")
    page = "# Title\n\ntext\n"
    once = with_block(page, new)
    assert once == page + "\n" + new
    assert with_block(once, new) == once


def test_guide_example_is_the_demo_row() -> None:
    """docs/guide/claims.md reads the demo's L4 row line by line: it is the generated one."""
    guide = (REPO / "docs" / "guide" / "claims.md").read_text()
    quoted = next(line for line in guide.splitlines() if line.startswith("| L4 |"))
    shown = quoted.removesuffix(" ... |")
    text = current_block((REPO / "docs" / "papers" / "lightyear.md").read_text())
    assert any(line.startswith(shown) for line in text.splitlines())
    l5 = next(line for line in text.splitlines() if line.startswith("| L5 |"))
    assert "| 7 | 23.31 |" in l5 and "7 blocks, detectable 23.3 points" in guide
