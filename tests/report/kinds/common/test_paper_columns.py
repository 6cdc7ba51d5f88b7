"""paper_comparison in columns mode (TFL, FedAgain) on hand-made cells: ours, the difference,
Kendall's tau, the bootstrap CI and the paired test of best vs. second, computed here by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from scipy.stats import t as student_t

from benchlib.config import load_config
from benchlib.errors import BenchlibError
from benchlib.report.base import get_kind

BASE = {"fedavg": 0.5, "fedprox": 0.6, "drfa": 0.7, "tfl": 0.4, "erm": 0.3}  # MSE per method
SEED_SHIFT = [0.0, 0.03, 0.06]  # added per seed (twice for TFL: its pairs with FedAvg vary)
CLIENT_SHIFT = [0.0, 0.1]  # added per client


def mse(method: str, seed: int, index: int) -> float:
    return BASE[method] + SEED_SHIFT[seed] * (2 if method == "tfl" else 1) + CLIENT_SHIFT[index]


def write_cells(spec: dict, folder: Path) -> list[Path]:
    """A metrics.json per TPT-48 cell: 2 federation and 2 held-out states, MSE by :func:`mse`."""
    for entry in spec["columns"][0]["files"] + spec["columns"][1]["files"]:
        method, seed = entry["method"], entry["seed"]
        path = folder / entry["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        metrics = {
            "clients": [
                {"client": c, "test_mse": mse(method, seed, i)} for i, c in enumerate([0, 5])
            ],
            "held_out_clients": [
                {"client": c, "test_mse": mse(method, seed, i)} for i, c in enumerate([1, 2])
            ],
        }
        path.write_text(json.dumps(metrics))
    return [folder / p for p in get_kind("paper_comparison").inputs(spec)[1:]]


def test_tfl_table4_report_by_hand(tmp_path: Path) -> None:
    config = load_config(REPO / "config" / "tfl_tpt48.yaml")
    report = config.reports["tfl_vs_paper"]
    assert report.targets == ["reports/tfl_vs_paper.md", "reports/tfl_vs_paper.pdf"]
    spec = report.spec
    assert [c["column"] for c in spec["columns"]][:2] == ["E(24) -> W(24)", "N(24) -> S(24)"]
    assert [m for m, _ in spec["columns"][0]["methods"]] == [
        "erm",
        "fedavg",
        "fedprox",
        "drfa",
        "tfl",
    ]
    inputs = [Path(report.inputs[0]), *write_cells(spec, tmp_path)]
    out = [tmp_path / "vs.md", tmp_path / "vs.pdf"]
    get_kind("paper_comparison").render(spec, inputs, out)
    text = out[0].read_text()
    lines = text.splitlines()
    assert lines[2].startswith("**Scale of this run: paper grid")  # the scale comes first
    assert "TPT-48 in full on CPU" in lines[2]
    assert lines[4] == "Cell scores: 60 (a cell counts once per column it fills); seeds: 0, 1, 2."
    # TFL E->W: per cell 0.4 + 2 x seed shift + 0.05 (client mean); over seeds 0.51 +- std
    # of (0.45, 0.51, 0.57) = 0.049; paper 0.4978: difference 0.0122
    assert "| tfl | 0.5100 +- 0.0490 | " in text and "| 0.4978 | 0.0122 | - |" in text
    # Kendall: ours tfl < fedavg < fedprox < drfa, paper tfl < drfa < fedavg < fedprox;
    # 4 concordant, 2 discordant pairs: tau = 1/3 (ERM, a reference, left out)
    summary = next(line for line in lines if line.startswith("| Table 4 | E(24) -> W(24) | mse"))
    assert "| 5 | 0.33 | tfl | tfl |" in summary
    # paired t-test tfl - fedavg over 3 seeds x 2 held-out states: differences -0.1 + shift
    d = np.array([-0.1, -0.1, -0.07, -0.07, -0.04, -0.04])
    t_value = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    p_value = 2 * student_t.sf(abs(t_value), df=len(d) - 1)
    assert f"tfl vs. fedavg: paired t-test, n = 6 pairs, p = {p_value:.3g}" in summary
    # TFL's CI: percentile bootstrap over its 6 units, within their range
    row = next(line for line in lines if line.startswith("| tfl | 0.5100"))
    low, high = (float(x) for x in row.split("| [")[1].split("]")[0].split(", "))
    assert 0.40 <= low < 0.51 < high <= 0.62
    assert out[1].read_bytes().startswith(b"%PDF")


def collected_rows(experiment: str, method: str, accuracy: list[float]) -> list[dict]:
    return [
        {"experiment": experiment, "dataset": "mnist5k_ls", "malfunction": "none",
         "method_id": method, "method": method, "k": 0, "seed": 0, "client": c, "malicious": False,
         "test_accuracy": a, "test_recall_macro": a, "test_precision_macro": a,
         "test_f1_macro": a, "n_train": 10, "n_val": 2, "n_test": n}
        for c, (a, n) in enumerate(zip(accuracy, [30, 10], strict=True))
    ]  # fmt: skip


def test_fedagain_demo_report_by_hand(tmp_path: Path) -> None:
    config = load_config(REPO / "config" / "fedagain_demo.yaml")
    report = config.reports["fedagain_vs_paper"]
    spec = report.spec
    inputs = [Path(report.inputs[0])]
    for path in report.inputs[1:]:
        experiment = Path(path).parent.name
        rows = collected_rows(experiment, "fedagain", [0.9, 0.6])
        rows += collected_rows(experiment, "fedavg", [0.7, 0.7])
        target = tmp_path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame(rows).to_csv(target, index=False)
        inputs.append(target)
    out = [tmp_path / "vs.md", tmp_path / "vs.pdf"]
    get_kind("paper_comparison").render(spec, inputs, out)
    text = out[0].read_text()
    assert "**Scale of this run: demo (another dataset at CPU scale): NOT a reproduction" in text
    # pooled accuracy: (0.9 x 30 + 0.6 x 10) / 40 = 82.5 %; paper ~75 (Figure 10, Light)
    assert "| fedagain | 82.50 +- 0.00 | n too small (n = 1) | 1 | ~75.00 | 7.50 | - |" in text
    assert "fedagain vs. fedavg: paired t-test, n too small (n = 1 pairs" in text
    assert "| Figure 10 | Light | precision_macro | 2 |" in text
    # macro scores in percent too (no per-class counts here: test-size-weighted client values)
    assert "| fedavg | 70.00 +- 0.00 | n too small (n = 1) | 1 | ~67.00 | 3.00 | - |" in text


def test_columns_mode_errors() -> None:
    raw = yaml_config("tfl_tpt48.yaml")
    raw["reports"]["tfl_vs_paper"]["columns"][0]["column"] = "E(24) -> X(24)"
    with pytest.raises(BenchlibError, match="has no column 'E\\(24\\) -> X\\(24\\)' of Table 4"):
        _config(raw)
    raw = yaml_config("tfl_tpt48.yaml")
    raw["reports"]["tfl_vs_paper"]["columns"][0]["experiments"] = ["nothing_*"]
    with pytest.raises(BenchlibError, match="no experiment matches 'nothing_\\*'"):
        _config(raw)
    raw = yaml_config("tfl_tpt48.yaml")
    raw["reports"]["tfl_vs_paper"]["compare"] = {"tpt48_ew": {"dataset": "x", "scale": "paper"}}
    with pytest.raises(BenchlibError, match="exactly one of compare"):
        _config(raw)


def yaml_config(name: str) -> dict:
    from benchlib.config import load_config_file

    return load_config_file(REPO / "config" / name)


def _config(raw: dict):
    from benchlib.config import Config

    return Config(raw).reports
