"""The LIGHTYEAR figure kinds (topology, gamma ablation, ANA-scale sensitivity, agreement view)
and the paper-vs-ours report, on small hand-made collected CSVs and metrics.json files: the data
drawn in each figure equals the data in its input files (no golden images), computed here by hand.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, tool_env

from benchlib.configuration.config import Config, load_config_file
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind
from benchlib.report.kinds.common.paper_comparison import compare_frame, kendall_by_column
from benchlib.report.kinds.lightyear.topology_figure import topology_frame

# smoke.yaml: experiment smoke (methods local, fedavg, lightyear; sfa, ana; k 0..2; 4 clients)
VAL = {  # method -> per round, per client validation accuracy
    "fedavg": [[0.5, 0.6, 0.7, 0.8], [0.6, 0.7, 0.8, 0.9]],
    "fedavg_gamma": [[0.4, 0.4, 0.4, 0.4], [0.5, 0.5, 0.7, 0.7]],
}


def raw_config(**extra) -> dict:
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["methods"]["fedavg_gamma"] = {
        "method": "fedavg",
        "label": "FedAvg g",
        "params": {"gamma": 0.5},
    }
    raw["methods"]["p2p_fedavg"] = {"label": "P2P FedAvg"}
    raw["experiments"]["gamma"] = {
        "dataset": "mnist5k", "methods": ["fedavg", "fedavg_gamma"], "malfunctions": ["ana"],
        "k": [0], "seeds": [0],
    }  # fmt: skip
    raw["experiments"]["topo"] = {
        "dataset": "mnist5k", "methods": ["p2p_fedavg"], "malfunctions": ["sfa", "ana"],
        "k": [0, 1, 2], "seeds": [0],
    }  # fmt: skip
    raw["experiments"]["scale"] = {
        "dataset": "mnist5k", "methods": ["fedavg"], "malfunctions": ["ana"], "k": [1, 2],
        "seeds": [0], "axes": {"ana.scale": [1.5, 120.5]},
    }  # fmt: skip
    raw["reports"] = extra
    return raw


def config(**reports) -> Config:
    return Config(raw_config(**reports))


def write_metrics(path: Path, val: list[list[float]], **extra) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    metrics = {
        "primary_metric": "accuracy",
        "history": {"val_accuracy": val, "scores": extra.pop("scores", []),
                    "selections": extra.pop("selections", [])},
        **extra,
    }  # fmt: skip
    path.write_text(json.dumps(metrics))
    return path


def lines_of(figure) -> dict[str, np.ndarray]:
    return {
        line.get_label(): np.asarray(line.get_ydata(), dtype=float)
        for ax in figure.axes
        for line in ax.get_lines()
        if not line.get_label().startswith("_")
    }


# ------------------------------------------------------------------------- gamma figure
def test_gamma_figure_draws_the_client_mean_per_round(tmp_path: Path) -> None:
    cfg = config(fig13={"kind": "gamma_figure", "experiments": ["gamma"]})
    report = cfg.reports["fig13"]
    assert report.inputs == (
        "results/runs/gamma/none/fedavg/k0/seed0/metrics.json",
        "results/runs/gamma/none/fedavg_gamma/k0/seed0/metrics.json",
    )
    inputs = [write_metrics(tmp_path / p, VAL[p.split("/")[4]]) for p in report.inputs]
    kind = get_kind("gamma_figure")
    drawn = lines_of(kind.draw(report.spec, inputs))
    np.testing.assert_allclose(drawn["FedAvg"], [65.0, 75.0])  # mean of .5 .6 .7 .8, .6 ... .9
    np.testing.assert_allclose(drawn["FedAvg g"], [40.0, 60.0])
    band = kind.draw(report.spec, inputs).axes[0].collections[1].get_paths()[0].vertices
    # the second band: mean 60 +- population std 10 at round 1
    assert {round(v, 6) for v in band[:, 1]} >= {50.0, 70.0}
    out = [tmp_path / "fig13.pdf", tmp_path / "fig13.png"]
    kind.render(report.spec, inputs, out)
    assert out[0].read_bytes().startswith(b"%PDF") and out[1].stat().st_size > 0


def test_gamma_figure_rejects_an_unknown_method() -> None:
    with pytest.raises(BenchlibError, match="has no method 'krum'"):
        config(bad={"kind": "gamma_figure", "experiments": ["gamma"], "methods": ["krum"]})


# -------------------------------------------------------------------- scale sensitivity
def test_scale_sensitivity_panels_per_k_lines_per_scale(tmp_path: Path) -> None:
    cfg = config(v1fig8={"kind": "scale_sensitivity", "experiment": "scale"})
    report = cfg.reports["v1fig8"]
    runs = report.spec["runs"]
    assert [(r["scale"], r["k"]) for r in runs] == [(1.5, 1), (1.5, 2), (120.5, 1), (120.5, 2)]
    inputs = []
    for run in runs:  # value = scale / 1000 + k / 10 + round / 100, the same for every client
        val = [[run["scale"] / 1000 + run["k"] / 10 + r / 100] * 4 for r in range(3)]
        inputs.append(write_metrics(tmp_path / run["path"], val))
    figure = get_kind("scale_sensitivity").draw(report.spec, inputs)
    assert len(figure.axes) == 2
    for ax, k in zip(figure.axes, (1, 2), strict=True):
        drawn = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
        for scale in (1.5, 120.5):
            expected = [100 * (scale / 1000 + k / 10 + r / 100) for r in range(3)]
            np.testing.assert_allclose(drawn[f"s = {scale:g}"], expected)


def test_scale_sensitivity_needs_the_axis() -> None:
    with pytest.raises(BenchlibError, match=r"has no 'ana\.scale' axis"):
        config(bad={"kind": "scale_sensitivity", "experiment": "gamma"})


# ------------------------------------------------------------------------- agreement view
def test_agreement_view_shows_the_recorded_score_matrix(tmp_path: Path) -> None:
    cfg = config(view={"kind": "agreement_view", "experiment": "smoke", "malfunction": "sfa",
                       "k": 1})  # fmt: skip
    report = cfg.reports["view"]
    assert report.inputs == ("results/runs/smoke/sfa/lightyear/k1/seed0/metrics.json",)
    scores = [
        [[None, 0.2, 0.9], [0.1, None, 0.8], [0.3, 0.85, None]],
        [[None, 0.25, 0.95], [0.15, None, 0.7], [0.2, 0.9, None]],
    ]
    path = write_metrics(
        tmp_path / "m.json", [[0.5] * 3] * 2, scores=scores,
        selections=[[[2], [2], [1]], [[2], [], [1]]], malicious_clients=[0],
        method_summary={"tau": 0.75, "gamma": 0.95},
    )  # fmt: skip
    figure = get_kind("agreement_view").draw(report.spec, [path])
    images = [ax.get_images()[0].get_array() for ax in figure.axes if ax.get_images()]
    assert len(images) == 2
    for image, matrix in zip(images, scores, strict=True):
        expected = np.array([[np.nan if s is None else s for s in row] for row in matrix])
        np.testing.assert_allclose(
            np.ma.filled(np.ma.asarray(image, dtype=float), np.nan), expected
        )
    colourbar = figure.axes[-1]
    assert [line.get_ydata()[0] for line in colourbar.get_lines()] == [0.75]  # tau drawn
    assert figure.axes[0].get_xticklabels()[0].get_color() == "red"  # malicious sender 0


def test_agreement_view_needs_recorded_scores(tmp_path: Path) -> None:
    cfg = config(view={"kind": "agreement_view", "experiment": "smoke", "malfunction": "sfa",
                       "k": 1, "method": "fedavg"})  # fmt: skip
    path = write_metrics(tmp_path / "m.json", [[0.5] * 3], scores=[[]])
    with pytest.raises(BenchlibError, match="recorded no peer scores"):
        get_kind("agreement_view").draw(cfg.reports["view"].spec, [path])


# -------------------------------------------------------------------------- topology figure
def collected_rows(experiment: str, method: str, base: float) -> list[dict]:
    rows = []
    for malfunction in ("sfa", "ana"):
        for k in (0, 1, 2):
            for client in range(4):
                rows.append({
                    "experiment": experiment, "malfunction": "none" if k == 0 else malfunction,
                    "method_id": method, "k": k, "seed": 0, "client": client,
                    "malicious": client < k, "test_accuracy": base - 0.1 * k + 0.02 * client,
                })  # fmt: skip
    return rows


def test_topology_figure_series_from_two_experiments(tmp_path: Path) -> None:
    cfg = config(fig5={
        "kind": "topology_figure", "malfunctions": ["sfa", "ana"],
        "series": [{"experiment": "smoke", "method": "fedavg"},
                   {"experiment": "topo", "method": "p2p_fedavg"},
                   {"experiment": "smoke", "method": "lightyear"}],
    })  # fmt: skip
    report = cfg.reports["fig5"]
    assert "results/collected/topo/sfa.csv" in report.inputs
    collected = pd.DataFrame(
        collected_rows("smoke", "fedavg", 0.8)
        + collected_rows("smoke", "lightyear", 0.9)
        + collected_rows("topo", "p2p_fedavg", 0.6)
    )
    frame = topology_frame(collected, report.spec)
    assert frame["experiment"].nunique() == 1  # one dataset: one row of panels
    p2p = frame[(frame["method"] == "P2P FedAvg") & (frame["malfunction"] == "SFA")]
    # mean over clients of 0.6 - 0.1 k + 0.02 c = 0.63 - 0.1 k, in percent
    np.testing.assert_allclose(p2p.sort_values("k")["value"], [63.0, 53.0, 43.0])
    np.testing.assert_allclose(p2p["spread"], 100 * np.std([0, 0.02, 0.04, 0.06]))
    paths = []
    for name, part in collected.groupby("experiment"):
        paths += write_collected(part, tmp_path, f"{name}_")
    out = [tmp_path / "fig5.pdf", tmp_path / "fig5.png"]
    get_kind("topology_figure").render(report.spec, paths, out)
    assert out[0].read_bytes().startswith(b"%PDF")


def write_collected(frame: pd.DataFrame, folder: Path, prefix: str = "") -> list[Path]:
    """The collected CSVs of one experiment as the workflow writes them: one per malfunction
    (``folder/<prefix><malfunction>.csv``), each with the k = 0 ("none") rows."""
    paths = []
    for malfunction in ("sfa", "ana"):
        path = folder / f"{prefix}{malfunction}.csv"
        frame[frame["malfunction"].isin(["none", malfunction])].to_csv(path, index=False)
        paths.append(path)
    return paths


# ------------------------------------------------------------------- paper comparison
def test_paper_comparison_by_hand(tmp_path: Path) -> None:
    entry = {"dataset": "femnist", "scale": "sample", "reading": "originals"}
    cfg = config(vs={"kind": "paper_comparison", "compare": {"smoke": entry}})
    report = cfg.reports["vs"]
    assert report.targets == ["reports/vs.md", "reports/vs.pdf"]
    assert report.inputs[0] == str(REPO / "config" / "paper_values" / "lightyear.csv")
    paper = pd.DataFrame([
        # FEMNIST SFA, Table 3: FedAvg 83.6 +- 5.4 (k 1), 76.6 +- 2.4 (k 2); LIGHTYEAR 90.1, 90.2
        {"table": 3, "dataset": "femnist", "malfunction": "sfa", "method": m, "k": k,
         "metric": "accuracy", "mean": mean, "std": std}
        for m, k, mean, std in [("fedavg", 1, 83.6, 5.4), ("fedavg", 2, 76.6, 2.4),
                                ("lightyear", 1, 90.1, 2.0), ("lightyear", 2, 90.2, 2.1),
                                ("local", 1, 10.0, 1.0), ("local", 2, 10.0, 1.0)]
    ])  # fmt: skip
    collected = pd.DataFrame(
        collected_rows("smoke", "fedavg", 0.8)
        + collected_rows("smoke", "lightyear", 0.7)
        + collected_rows("smoke", "local", 0.5)
    )
    frame = compare_frame(collected, paper, report.spec["experiments"])
    row = frame[(frame["method_id"] == "fedavg") & (frame["malfunction"] == "sfa")]
    row = row[row["k"] == 1].iloc[0]
    # ours: 0.83 - 0.1 = 73.0 %; 73.0 - 83.6 = -10.6, |-10.6| <= 2 x 5.4 = 10.8
    assert row["ours"] == pytest.approx(73.0) and row["difference"] == pytest.approx(-10.6)
    assert bool(row["within_2std"]) and int(row["table"]) == 3
    k2 = frame[(frame["method_id"] == "fedavg") & (frame["malfunction"] == "sfa")]
    assert not bool(k2[k2["k"] == 2].iloc[0]["within_2std"])  # 63.0 vs 76.6 +- 2 x 2.4
    assert frame[frame["malfunction"] == "ana"]["paper"].isna().all()  # no ANA value given
    taus = kendall_by_column(frame)
    sfa1 = taus[(taus["malfunction"] == "sfa") & (taus["k"] == 1)].iloc[0]
    # ours: fedavg 73 > lightyear 63 > local 43; paper: lightyear > fedavg > local
    # pairs: (fa, ly) discordant, (fa, lo) concordant, (ly, lo) concordant: tau = (2 - 1) / 3
    assert sfa1["kendall_tau"] == pytest.approx(1 / 3) and sfa1["methods"] == 3

    paper_csv = tmp_path / "paper.csv"
    paper.to_csv(paper_csv, index=False)
    inputs = [paper_csv, *write_collected(collected, tmp_path)]
    out = [tmp_path / "vs.md", tmp_path / "vs.pdf"]
    get_kind("paper_comparison").render(report.spec, inputs, out)
    text = out[0].read_text()
    assert "CPU sample" in text and "NOT a reproduction" in text
    assert "| femnist | CPU sample (smaller data and grid): NOT a reproduction" in text
    assert "not comparable | originals |" in text
    assert "| fedavg | 1 | 73.0 +- 2.2 | 83.6 +- 5.4 | -10.6 | yes |" in text
    assert "| 1 | 3 | 0.33 |" in text
    assert out[1].read_bytes().startswith(b"%PDF")
    assert not math.isnan(frame["ours"].sum())


def test_paper_comparison_marks_diverged_cells(tmp_path: Path, monkeypatch) -> None:
    """A value over a cell whose models went non-finite (collected ``nonfinite``) carries a
    dagger in the table and the figure, and a note counts and names the cell: a reader
    comparing with the paper never takes it for an ordinary number."""
    import benchlib.report.kinds.common.paper_comparison as comparison

    entry = {"dataset": "femnist", "scale": "sample"}
    report = config(vs={"kind": "paper_comparison", "compare": {"smoke": entry}}).reports["vs"]
    paper = pd.DataFrame([
        {"table": 3, "dataset": "femnist", "malfunction": "sfa", "method": "fedavg", "k": k,
         "metric": "accuracy", "mean": mean, "std": 2.0}
        for k, mean in [(1, 83.6), (2, 76.6)]
    ])  # fmt: skip
    collected = pd.DataFrame(collected_rows("smoke", "fedavg", 0.8))
    # FedAvg's SFA k = 2 cell (seed 0) recorded 3 non-finite models; the others none
    diverged = (collected["malfunction"] == "sfa") & (collected["k"] == 2)
    collected["nonfinite"] = diverged.astype(int) * 3
    frame = compare_frame(collected, paper, report.spec["experiments"])
    flags = {(row.malfunction, row.k): row.diverged for row in frame.itertuples()}
    assert flags == {("sfa", 1): 0, ("sfa", 2): 1, ("ana", 1): 0, ("ana", 2): 0}

    figures = []
    monkeypatch.setattr(comparison, "save_figure", lambda figure, pdf: figures.append(figure))
    paper_csv = tmp_path / "paper.csv"
    paper.to_csv(paper_csv, index=False)
    out = [tmp_path / "vs.md", tmp_path / "vs.pdf"]
    inputs = [paper_csv, *write_collected(collected, tmp_path)]
    get_kind("paper_comparison").render(report.spec, inputs, out)
    lines = out[0].read_text().splitlines()
    # ours: 0.83 - 0.1 k in percent, std over the clients 2.2
    assert any(line.startswith("| fedavg | 2 | 63.0 +- 2.2\u2020 | 76.6 +- 2.0 | -13.6 | no |")
               for line in lines)  # fmt: skip
    assert any(line.startswith("| fedavg | 1 | 73.0 +- 2.2 | 83.6") for line in lines)
    assert sum("\u2020 |" in line for line in lines) == 1
    note = (
        "\u2020 1 diverged cell (non-finite model weights during training): "
        "smoke/sfa/fedavg/k2/seed0. Values marked \u2020 include them and are not comparable "
        "with the paper's."
    )
    assert note in lines
    (ax,) = figures[0].axes
    assert [t.get_text() for t in ax.texts] == [
        "\u2020",  # beside the point (paper 76.6, ours 63.0)
        "\u2020 1 point includes diverged cells (non-finite models)",
    ]
    assert ax.texts[0].xy == pytest.approx((76.6, 63.0))


def test_topology_figure_one_row_per_dataset() -> None:
    raw = raw_config()
    raw["datasets"]["second"] = {**raw["datasets"]["mnist5k"], "label": "Second set"}
    raw["experiments"]["topo2"] = {**raw["experiments"]["topo"], "dataset": "second"}
    raw["reports"] = {
        "fig6": {
            "kind": "topology_figure",
            "malfunctions": ["sfa"],
            "series": [
                {"experiment": "topo", "method": "p2p_fedavg"},
                {"experiment": "topo2", "method": "p2p_fedavg"},
            ],
        }
    }
    spec = Config(raw).reports["fig6"].spec
    collected = pd.DataFrame(
        collected_rows("topo", "p2p_fedavg", 0.6) + collected_rows("topo2", "p2p_fedavg", 0.9)
    )
    frame = topology_frame(collected, spec)
    rows = frame.groupby("experiment")["value"].max().to_dict()
    label = Config(raw).datasets["mnist5k"].get("label", "mnist5k")
    assert rows == {label: pytest.approx(63.0), "Second set": pytest.approx(93.0)}


PAPER_FIGURES = [
    "figures/lightyear_fig5.pdf",
    "figures/lightyear_fig13.pdf",
    "figures/lightyear_v1_fig8.pdf",
    "figures/lightyear_v1_fig9.pdf",
    "figures/lightyear_agreement_femnist_sfa_k4.pdf",
]


@pytest.mark.workflow
def test_paper_figure_targets_resolve_in_the_default_config(tmp_path: Path) -> None:
    result = subprocess.run(
        ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n", *PAPER_FIGURES,
         "reports/lightyear_vs_paper.md"],
        capture_output=True, text=True, env=tool_env(), timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.M))
    assert stats["render_figure"] == str(len(PAPER_FIGURES))
    assert stats["render_markdown"] == "1"
    assert not (tmp_path / "results").exists()
