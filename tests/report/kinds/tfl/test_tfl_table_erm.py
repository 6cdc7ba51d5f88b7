"""tfl_table's Centralized column group (ERM) and TFL Table 2's best-round columns (value at the
best round, the round, c-params), against hand-made metrics.json files and hand-computed numbers;
the paper config's Tables 2 and 3."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from benchlib.configuration.config import Config
from benchlib.grid.paper_configs import load_paper_config
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind
from benchlib.report.kinds.tfl.tfl_table import best_round, c_params_millions

FEDERATION = 4  # clients per cell
PARAMETERS = 250_000  # transmitted_parameters per model

# method -> per seed, per round: the two held-out clients' test ROC-AUC (None: undefined)
CURVES = {
    "erm": [
        [[0.6, 0.7], [0.8, None], [0.7, 0.7]],  # scope means 0.65, 0.80, 0.70
        [[0.5, 0.6], [0.7, 0.7], [0.9, 0.9]],  # 0.55, 0.70, 0.90
    ],  # seed mean 0.60, 0.75, 0.80 -> best round 3: 70, 90 -> 80.0 +- 10.0
    "fedavg": [
        [[0.5, 0.5], [0.6, 0.6], [0.65, 0.65]],
        [[0.5, 0.5], [0.62, 0.62], [0.63, 0.63]],
    ],  # 0.50, 0.61, 0.64 -> round 3: 64.0 +- 1.0; c-params 3 x 4 x 0.25M x 1 = 3.00
    "tfl": [
        [[0.7, 0.7], [0.6, 0.6], [0.6, 0.6]],
        [[0.66, 0.66], [0.7, 0.7], [0.5, 0.5]],
    ],  # 0.68, 0.65, 0.55 -> round 1: 68.0 +- 2.0; c-params 1 x 4 x 0.25M x 2 = 2.00
}


def cell_metrics(curve: list[list[float | None]]) -> dict:
    """A metrics.json whose final held-out values are the last round's."""
    held = [{"client": 10 + i, "test_roc_auc": v} for i, v in enumerate(curve[-1])]
    return {
        "clients": [{"client": i, "test_roc_auc": 0.9} for i in range(FEDERATION)],
        "held_out_clients": held,
        "transmitted_parameters": PARAMETERS,
        "history": {
            "round_metrics": [
                {
                    "clients": [{"roc_auc": 0.9}] * FEDERATION,
                    "held_out_clients": [{"roc_auc": v} for v in values],
                }
                for values in curve
            ]
        },
    }


def write_cells(tmp_path: Path, curves: dict = CURVES) -> tuple[dict, list[Path]]:
    cells, inputs = {}, []
    for method, seeds in curves.items():
        for seed, curve in enumerate(seeds):
            path = tmp_path / method / f"seed{seed}" / "metrics.json"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps(cell_metrics(curve)))
            cells.setdefault(f"exp/{method}", []).append(str(path))
            inputs.append(path)
    return cells, inputs


def table2_spec(cells: dict, **changes) -> dict:
    spec = {
        "name": "t2",
        "metric": "roc_auc",
        "metric_label": "ROC-AUC",
        "percent": True,
        "decimals": 1,
        "centralized": [["erm", "ERM"]],
        "methods": [["fedavg", "FedAvg"], ["tfl", "TFL"]],
        "best_round": True,
        "transmissions": {"tfl": 2},
        "rows": [{"label": "OOF", "experiment": "exp", "scope": "oof", "block": ""}],
        "pooling": "pooled",
        "columns": "methods",
        "average": False,
        "cells": cells,
        "title": "T2",
        "caption_note": "",
        "quoted": {
            "OOF": {
                "erm": 67.04,
                "fedavg": {"value": 57.18, "std": 0.03, "round": 6, "c_params": 15.66},
                "tfl": 58.41,
            }
        },
    }
    return {**spec, **changes}


def render(spec: dict, inputs: list[Path], tmp_path: Path) -> str:
    out = tmp_path / "t.tex"
    get_kind("tfl_table").render(spec, inputs, [out])
    return out.read_text()


def test_the_paper_count_of_communicated_parameters():
    """Table 2's c-params: 2.61M per round for FedAvg/FedProx/FedSR, twice that for DRFA/TFL
    (58 clients x 45k parameters reproduces all five numbers)."""
    assert c_params_millions(5, 58, 45_000, 1) == pytest.approx(15.66)  # FedAvg, round 6
    assert c_params_millions(7, 58, 45_000, 1) == pytest.approx(20.88)  # FedSR, round 8
    assert c_params_millions(1, 58, 45_000, 2) == pytest.approx(10.44)  # DRFA, TFL, round 2
    assert c_params_millions(0, FEDERATION, PARAMETERS, 2) == 2.0


def test_best_round_of_the_seed_mean():
    assert best_round([[0.1, 0.5, 0.4], [0.3, 0.2, 0.4]], "roc_auc", "x") == 2  # 0.2 .35 .4
    assert best_round([[0.1, 0.5, 0.4], [0.3, 0.2, 0.4]], "mse", "x") == 0  # lower is better
    nan = float("nan")
    assert best_round([[nan, 0.5, 0.25], [nan, 0.5, 0.75]], "roc_auc", "x") == 1  # tie: earliest
    with pytest.raises(BenchlibError, match="seeds ran different rounds"):
        best_round([[0.1], [0.1, 0.2]], "roc_auc", "x")
    with pytest.raises(BenchlibError, match="no round has a defined value"):
        best_round([[nan, nan]], "roc_auc", "x")


def test_table2_best_round_columns_by_hand(tmp_path):
    cells, inputs = write_cells(tmp_path)
    text = render(table2_spec(cells), inputs, tmp_path)
    lines = text.splitlines()
    assert r"\begin{tabular}{lcccccccc}" in lines
    assert r" & \multicolumn{2}{c}{Centralized} & \multicolumn{6}{c}{Federated} \\" in lines
    assert r"\cmidrule(lr){2-3}\cmidrule(lr){4-9}" in lines
    assert (
        r" & \multicolumn{2}{c}{ERM} & \multicolumn{3}{c}{FedAvg} & \multicolumn{3}{c}{TFL} \\"
        in lines
    )
    assert (
        r" & ROC-AUC & round & ROC-AUC & round & c-params (M) & ROC-AUC & round & c-params (M) \\"
        in lines
    )
    ours = r"OOF & 80.0 $\pm$ 10.0 & 3 & 64.0 $\pm$ 1.0 & 3 & 3.00 & 68.0 $\pm$ 2.0 & 1 & 2.00 \\"
    assert ours in lines
    # quoted numbers in their own block; a bare number fills only the value column
    assert r"\multicolumn{9}{l}{\textit{paper (quoted)}} \\" in lines
    assert r"OOF & 67.04 & -- & 57.18 $\pm$ 0.03 & 6 & 15.66 & 58.41 & -- & -- \\" in lines
    assert lines.index(ours) < lines.index(r"\multicolumn{9}{l}{\textit{paper (quoted)}} \\")
    assert "TFL: 2; others 1" in text and "Centralized (ERM)" in text


def test_final_values_with_a_centralized_group(tmp_path):
    """Without best_round: the final held-out values (client means), ERM in its own group, one
    column each."""
    cells, inputs = write_cells(tmp_path)
    spec = table2_spec(cells, best_round=False, transmissions={}, pooling="clients")
    text = render(spec, inputs, tmp_path)
    # final rounds: erm 0.70, 0.90; fedavg 0.65, 0.63; tfl 0.60, 0.50
    assert r"OOF & 80.0 $\pm$ 10.0 & 64.0 $\pm$ 1.0 & 55.0 $\pm$ 5.0 \\" in text
    assert r" & \multicolumn{1}{c}{Centralized} & \multicolumn{2}{c}{Federated} \\" in text
    assert r"\cmidrule(lr){2-2}\cmidrule(lr){3-4}" in text
    assert r" & ERM & FedAvg & TFL \\" in text and "c-params" not in text
    assert r"OOF & 67.04 & 57.18 $\pm$ 0.03 & 58.41 \\" in text
    # methods as rows: a Centralized and a Federated block
    rows = render({**spec, "columns": "rows", "average": True}, inputs, tmp_path).splitlines()
    at = rows.index(r"\multicolumn{3}{l}{\textit{Centralized}} \\")
    assert rows[at + 1] == r"ERM & 80.0 $\pm$ 10.0 & 80.0 \\"
    assert rows[at + 2] == r"\multicolumn{3}{l}{\textit{Federated}} \\"
    assert rows[at + 3] == r"FedAvg & 64.0 $\pm$ 1.0 & 64.0 \\"


def test_c_params_need_the_model_size(tmp_path):
    cells, inputs = write_cells(tmp_path)
    for path in inputs:
        metrics = json.loads(path.read_text())
        del metrics["transmitted_parameters"]
        path.write_text(json.dumps(metrics))
    with pytest.raises(BenchlibError, match="transmitted_parameters"):
        render(table2_spec(cells), inputs, tmp_path)
    # ... but ERM alone communicates nothing and needs none
    only_erm = table2_spec(cells, methods=[], quoted={})
    assert r"OOF & 80.0 $\pm$ 10.0 & 3 \\" in render(only_erm, inputs, tmp_path)


def test_a_cell_without_round_metrics_is_a_clear_error(tmp_path):
    cells, inputs = write_cells(tmp_path)
    metrics = json.loads(inputs[0].read_text())
    del metrics["history"]["round_metrics"]
    inputs[0].write_text(json.dumps(metrics))
    with pytest.raises(BenchlibError, match=r"training\.round_metrics"):
        render(table2_spec(cells), inputs, tmp_path)


def test_paper_tables_2_and_3_have_an_erm_column():
    config = Config(load_paper_config())
    table2, table3 = config.reports["tfl_table2"], config.reports["tfl_table3"]
    assert table2.spec["centralized"] == [["erm", "ERM"]]
    assert table2.spec["best_round"] and table2.spec["transmissions"] == {"drfa": 2, "tfl": 2}
    assert len(table2.inputs) == 6 * 3  # ERM + 5 federated methods x 3 seeds
    assert "results/runs/tfl_eicu/none/erm/k0/seed2/metrics.json" in table2.inputs
    quoted = table2.spec["quoted"]["OOF (WEST)"]
    assert quoted["erm"] == {"value": 67.04, "std": 1.88}
    assert quoted["tfl"] == {"value": 58.41, "std": 0.06, "round": 2, "c_params": 10.44}
    assert table3.spec["centralized"] == [["erm", "ERM"]] and not table3.spec["best_round"]
    assert "results/runs/tfl_fets/none/erm/k0/seed0/metrics.json" in table3.inputs
    assert table3.spec["quoted"]["OOF"]["erm"] == 83.14
    assert "ERM" not in table3.spec["caption_note"]  # no longer "not run"
    assert config.methods["erm"] == {"method": "erm", "label": "ERM", "params": {}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"columns": "rows"}, "best_round needs columns: methods"),
        (
            {"rows": [{"label": "OOF", "experiment": "tfl_fets", "scope": "oof"}], "quoted": {}},
            r"datasets\.tfl_fets\.training\.round_metrics",
        ),
        ({"centralized": ["erm", "fedavg"]}, "in both centralized and methods"),
        ({"transmissions": {"erm": 2}}, "transmissions names no federated method"),
    ],
)
def test_bad_table2_entries_fail_at_config_load(change, message):
    raw = copy.deepcopy(load_paper_config())
    raw["reports"]["tfl_table2"].update(change)
    if "rows" in change:
        raw["reports"]["tfl_table2"]["methods"] = ["fedavg"]
    with pytest.raises(BenchlibError, match=message):
        Config(raw)


def test_a_diverged_cell_is_marked_never_a_plain_number(tmp_path):
    """A seed whose models went non-finite puts a dagger on its entry and a note counting the
    diverged cells in the caption."""
    cells, inputs = write_cells(tmp_path)
    spec = table2_spec(cells, best_round=False, transmissions={}, pooling="clients")
    assert "dagger" not in render(spec, inputs, tmp_path)
    diverged = tmp_path / "tfl" / "seed1" / "metrics.json"
    metrics = json.loads(diverged.read_text())
    metrics["history"]["nonfinite"] = [{"round": 2, "model": "global"}]
    diverged.write_text(json.dumps(metrics))
    text = render(spec, inputs, tmp_path)
    assert r"OOF & 80.0 $\pm$ 10.0 & 64.0 $\pm$ 1.0 & 55.0 $\pm$ 5.0$^{\dagger}$ \\" in text
    assert r"$^{\dagger}$ Includes 1 diverged cell (non-finite model weights" in text
