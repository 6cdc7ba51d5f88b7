"""The decisive TPT-48 run's block on docs/papers/tfl.md equals what the readings report computes
now from the committed cells (python -m benchlib.commands.readings_docs), and one of its numbers
is recomputed by hand with scipy from those cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import REPO
from scipy import stats

from benchlib.commands.claims_docs import golden_path
from benchlib.commands.readings_docs import (
    CELLS,
    END,
    PAGE,
    START,
    block,
    current_block,
    with_block,
)


def test_tfl_page_block_is_current() -> None:
    text = (REPO / PAGE).read_text()
    assert current_block(text) == block(REPO), (
        f"{PAGE}: the decisive run's block is out of date; run "
        "python -m benchlib.commands.readings_docs"
    )


DRAWS = "__reading_client_draws_withoutreplacement"


def _pooled(experiment: str, method: str, scope: str) -> list[float]:
    runs = f"results/runs/{experiment}/none/{method}/k0/seed"
    paths = [golden_path(REPO, CELLS, f"{runs}{seed}/metrics.json") for seed in range(5)]
    return [json.loads(Path(p).read_text())["pooled"][scope]["mse"] for p in paths]


def test_one_order_test_recomputed_by_hand() -> None:
    """The closest combination (C + draws without replacement), E(24) -> W(24): TFL against
    DRFA by a paired t-test over the 5 seeds, as scipy computes it from the committed cells."""
    combo = "__reading_dual_step_gamma0p01"
    tfl = _pooled(f"tpt48_ew{combo}__reading_prior_normalised{DRAWS}", "tfl", "oof")
    drfa = _pooled(f"tpt48_ew{combo}{DRAWS}", "drfa", "oof")
    p_value = stats.ttest_rel(tfl, drfa).pvalue
    gap = sum(drfa) / 5 - sum(tfl) / 5  # the paper ranks TFL better: positive agrees
    text = current_block((REPO / PAGE).read_text())
    row = next(
        line
        for line in text.splitlines()
        if "without_replacement | E(24) -> W(24) | tfl > drfa" in line
    )
    fields = [f.strip() for f in row.strip("|").split("|")]
    assert float(fields[3]) == pytest.approx(gap, abs=5e-5)
    assert float(fields[5]) == pytest.approx(p_value, abs=5e-4)
    assert fields[7] == "reversed"  # TFL behind DRFA there, not significantly


def test_the_golden_holds_exactly_the_cells_the_report_reads() -> None:
    """130 cells: the decisive run in full (the claims report reads 60 of them)."""
    from benchlib.commands.readings_docs import _inputs, _spec

    wanted = {golden_path(REPO, CELLS, n) for n in _inputs(_spec(REPO))}
    assert set((REPO / CELLS / "runs").rglob("metrics.json")) == wanted
    assert len(wanted) == 130


def test_with_block_replaces_only_the_block() -> None:
    page = f"# T\n\nbefore\n\n{START}\nold\n{END}\n\nafter\n"
    assert with_block(page, f"{START}\nnew\n{END}\n") == (
        f"# T\n\nbefore\n\n{START}\nnew\n{END}\n\nafter\n"
    )
