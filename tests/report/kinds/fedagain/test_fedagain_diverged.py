"""FedAgain's figures count diverged cells (non-finite models) in their caption statistic."""

from __future__ import annotations

import pandas as pd

from benchlib.report.kinds.fedagain.fedagain_fig13 import with_diverged_note

SPEC = {"statistic": "s", "methods": [["fedavg", "FedAvg"], ["fedagain", "FedAgain"]]}


def collected(nonfinite: dict[tuple[str, int], int] | None) -> pd.DataFrame:
    rows = [
        {"experiment": "e", "method_id": method, "seed": seed, "client": client}
        for method in ("fedavg", "fedagain", "bulyan")
        for seed in (0, 1)
        for client in range(3)
    ]
    frame = pd.DataFrame(rows)
    if nonfinite is not None:
        frame["nonfinite"] = [nonfinite.get((r["method_id"], r["seed"]), 0) for r in rows]
    return frame


def test_no_diverged_cell_leaves_the_statistic_alone():
    assert with_diverged_note(SPEC, collected(None)) == SPEC
    assert with_diverged_note(SPEC, collected({})) == SPEC
    # a method the figure does not draw does not count
    assert with_diverged_note(SPEC, collected({("bulyan", 0): 2})) == SPEC


def test_diverged_cells_are_counted_once_per_cell_and_named_by_method():
    noted = with_diverged_note(SPEC, collected({("fedavg", 0): 4, ("fedavg", 1): 1}))
    assert noted["statistic"] == ("s; \u2020 includes 2 diverged cells (non-finite models: FedAvg)")
