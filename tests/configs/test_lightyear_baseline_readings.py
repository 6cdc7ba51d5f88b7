"""Two readings of every LIGHTYEAR table (issue 11, item 6): the paper targets run the baselines
as the authors' code did, ``*_faithful`` twins run every method as its original paper; the
paper-vs-ours report shows both side by side; auxiliary experiments add no default tables; the
demo and the FEMNIST sample get a comparison report that states their scale."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO
from helpers.paths import GOLDEN

from benchlib.configuration.config import Config, load_config_file
from benchlib.configuration.targets import all_targets
from benchlib.grid.paper_configs import load_paper_config
from benchlib.report.base import get_kind
from benchlib.report.kinds.common.paper_comparison import (
    compare_frame,
    kendall_by_column,
    method_by_reading,
    reading_summary,
)

DATASETS = ("femnist", "camelyon17", "isic19", "ultrasound", "xray")
MALFUNCTIONS = ("ana", "sfa", "random", "dynamic")
# the authors' code has a variant of every baseline but FedProx (not in their code)
AUTHORS = {"fedavg", "afa", "asmr", "cfl", "ditto", "krum", "balance", "scclip"}


# ------------------------------------------------------------------ the default config
@pytest.fixture(scope="module")
def default() -> Config:
    return Config(load_paper_config(REPO / "config" / "paper"))


def implementation(config: Config, method_id: str) -> str:
    return config.methods[method_id].get("method", method_id)


@pytest.mark.parametrize("dataset", DATASETS)
def test_every_paper_table_has_a_faithful_twin(default: Config, dataset: str) -> None:
    paper, faithful = default.experiments[dataset], default.experiments[f"{dataset}_faithful"]
    for key in ("dataset", "malfunctions", "k", "seeds"):
        assert paper[key] == faithful[key]  # the same grid, written once
    assert [implementation(default, m) for m in paper["methods"]] == [
        implementation(default, m) for m in faithful["methods"]
    ]
    for method_id in paper["methods"]:
        name = implementation(default, method_id)
        if name in AUTHORS:
            assert method_id == f"{name}_authors"
            expected = {"weighting": "batches"} if name == "fedavg" else {"variant": "authors"}
            assert default.raw["methods"][method_id]["params"] == expected  # as written
        else:  # FedProx and LIGHTYEAR follow their papers in both readings
            assert method_id in faithful["methods"]
    for method_id in faithful["methods"]:
        assert default.methods[method_id].get("params", {}).get("variant", "paper") == "paper"
    for malfunction in MALFUNCTIONS:
        table = default.reports[f"{dataset}_{malfunction}"]
        twin = default.reports[f"{dataset}_{malfunction}_faithful"]
        assert table.spec["experiment"] == dataset
        assert twin.spec["experiment"] == f"{dataset}_faithful"
        assert twin.spec["metric"] == table.spec["metric"]
        assert [label for _, label in twin.spec["methods"]] == [
            label for _, label in table.spec["methods"]
        ]  # the same rows, labelled as the paper
    compare = {
        e["experiment"]: e for e in default.reports["lightyear_vs_paper"].spec["experiments"]
    }
    assert compare[dataset]["reading"] == "authors' code"
    assert compare[f"{dataset}_faithful"]["reading"] == "original papers"


def test_auxiliary_experiments_add_no_default_tables_or_figures(default: Config) -> None:
    targets = set(all_targets(default))
    auxiliary = [
        e
        for e, exp in default.experiments.items()
        if exp.get("base", e).endswith(("_faithful", "_topology", "_gamma", "_scale"))
        and exp["dataset"].split("__")[0] in DATASETS
    ]
    assert len(auxiliary) == 5 + 3 + 2 + 8  # twins, topology, gamma, 4 + 4 scale variants
    for experiment in auxiliary:
        assert f"figures/{experiment}_robustness.pdf" not in targets
        for malfunction in default.experiments[experiment]["malfunctions"]:
            assert f"tables/{experiment}_{malfunction}.tex" not in targets
    assert "tables/femnist_ana.tex" in targets and "figures/femnist_robustness.pdf" in targets


def test_default_reports_false_drops_only_the_implicit_reports() -> None:
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["experiments"]["twin"] = {**raw["experiments"]["smoke"], "default_reports": False}
    raw["reports"] = {"twin_sfa_x": {"kind": "robustness_table", "experiment": "twin",
                                     "malfunction": "sfa"}}  # fmt: skip
    config = Config(raw)
    assert sorted(config.reports) == [
        "smoke_ana", "smoke_robustness", "smoke_sfa", "twin_sfa_x",
    ]  # fmt: skip
    raw["experiments"]["twin"]["default_reports"] = True
    assert {"twin_sfa", "twin_ana", "twin_robustness"} <= set(Config(raw).reports)


# ------------------------------------------------------------ the report: both readings
def readings_config() -> Config:
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["methods"]["fedavg_authors"] = {
        "method": "fedavg", "label": "FedAvg", "params": {"weighting": "batches"},
    }  # fmt: skip
    raw["experiments"]["smoke"].update(
        methods=["fedavg_authors", "lightyear"], malfunctions=["sfa"]
    )
    raw["experiments"]["smoke_faithful"] = {
        **raw["experiments"]["smoke"], "title": "smoke twin", "methods": ["fedavg", "lightyear"],
        "default_reports": False,
    }  # fmt: skip
    raw["reports"] = {
        "vs": {
            "kind": "paper_comparison",
            "compare": {
                "smoke": {"dataset": "femnist", "scale": "sample", "reading": "authors' code"},
                "smoke_faithful": {
                    "dataset": "femnist", "scale": "sample", "reading": "original papers",
                },
            },
        }
    }  # fmt: skip
    return Config(raw)


# every client of a cell gets the same accuracy, so ours = that value and ours_std = 0
OURS = {
    ("smoke", "fedavg_authors"): (0.80, 0.60),
    ("smoke", "lightyear"): (0.905, 0.90),
    ("smoke_faithful", "fedavg"): (0.70, 0.50),
    ("smoke_faithful", "lightyear"): (0.905, 0.90),
}


def readings_collected() -> pd.DataFrame:
    rows = []
    for (experiment, method), values in OURS.items():
        for k, value in zip((1, 2), values, strict=True):
            for client in range(4):
                rows.append({
                    "experiment": experiment, "malfunction": "sfa", "method_id": method,
                    "k": k, "seed": 0, "client": client, "malicious": client < k,
                    "test_accuracy": value,
                })  # fmt: skip
    return pd.DataFrame(rows)


# FEMNIST SFA, paper Table 3: FedAvg 83.6 +- 5.4 (k 1), 76.6 +- 2.4 (k 2); LIGHTYEAR 90.1 +- 2.0,
# 90.2 +- 2.1
PAPER = pd.DataFrame([
    {"table": 3, "dataset": "femnist", "malfunction": "sfa", "method": m, "k": k,
     "metric": "accuracy", "mean": mean, "std": std}
    for m, k, mean, std in [("fedavg", 1, 83.6, 5.4), ("fedavg", 2, 76.6, 2.4),
                            ("lightyear", 1, 90.1, 2.0), ("lightyear", 2, 90.2, 2.1)]
])  # fmt: skip


def test_both_readings_side_by_side_by_hand(tmp_path: Path) -> None:
    config = readings_config()
    assert "smoke_faithful_sfa" not in config.reports
    spec = config.reports["vs"].spec
    frame = compare_frame(readings_collected(), PAPER, spec["experiments"])
    summary = reading_summary(frame, kendall_by_column(frame)).set_index("experiment")
    # authors' reading: differences -3.6, -16.6 (FedAvg), 0.4, -0.2 (LIGHTYEAR); within 2 std:
    # 3.6 <= 10.8 yes, 16.6 <= 4.8 no, 0.4 <= 4.0 yes, 0.2 <= 4.2 yes; median |d| = (0.4+3.6)/2
    assert summary.loc["smoke", ["cells", "compared", "within"]].tolist() == [4, 4, 3]
    assert summary.loc["smoke", "median_abs_difference"] == pytest.approx(2.0)
    # faithful: -13.6, -26.6 (both outside 2 std), 0.4, -0.2; median |d| = (0.4 + 13.6) / 2
    assert summary.loc["smoke_faithful", "within"] == 2
    assert summary.loc["smoke_faithful", "median_abs_difference"] == pytest.approx(7.0)
    # both columns keep the paper's order (FedAvg below LIGHTYEAR): tau 1
    assert summary["mean_kendall_tau"].tolist() == [1.0, 1.0]
    per_method = method_by_reading(frame).set_index(["paper_method", "experiment"])
    assert per_method.loc[("fedavg", "smoke"), "mean_difference"] == pytest.approx(-10.1)
    assert per_method.loc[("fedavg", "smoke_faithful"), "mean_difference"] == pytest.approx(-20.1)
    assert per_method.loc[("lightyear", "smoke"), "mean_difference"] == pytest.approx(0.1)

    paper_csv = tmp_path / "paper.csv"
    PAPER.to_csv(paper_csv, index=False)
    collected = readings_collected()
    inputs = [paper_csv]
    for experiment in ("smoke", "smoke_faithful"):
        path = tmp_path / f"{experiment}_sfa.csv"
        collected[collected["experiment"] == experiment].to_csv(path, index=False)
        inputs.append(path)
    out = [tmp_path / "vs.md", tmp_path / "vs.pdf"]
    get_kind("paper_comparison").render(spec, inputs, out)
    text = out[0].read_text()
    assert "| smoke test | authors' code | sample | 4 | 4 | 3 | 2.0 | 1.00 |" in text
    assert "| smoke twin | original papers | sample | 4 | 4 | 2 | 7.0 | 1.00 |" in text
    assert "| method | authors' code (smoke) | original papers (smoke_faithful) |" in text
    assert "| fedavg | -10.1 (1 of 2) | -20.1 (0 of 2) |" in text
    assert "| lightyear | 0.1 (2 of 2) | 0.1 (2 of 2) |" in text
    assert "| fedavg_authors | 2 | 60.0 +- 0.0 | 76.6 +- 2.4 | -16.6 | no |" in text


# ------------------------------------------------------- demo and FEMNIST sample reports
def render_report(config: Config, name: str, collected: list[Path], tmp_path: Path) -> str:
    report = config.reports[name]
    out = [tmp_path / f"{name}.md", tmp_path / f"{name}.pdf"]
    get_kind(report.kind).render(report.spec, [Path(report.inputs[0]), *collected], out)
    assert out[1].read_bytes().startswith(b"%PDF")
    return out[0].read_text()


def cell_text(frame: pd.DataFrame, malfunction: str, method: str, k: int) -> str:
    """ours as the report prints it, recomputed from the collected per-client rows."""
    rows = frame[(frame["malfunction"] == malfunction) & (frame["method_id"] == method)]
    values = 100 * rows[rows["k"] == k]["test_accuracy"].to_numpy()
    return f"{values.mean():.1f} +- {values.std(ddof=0):.1f}"


def test_demo_comparison_states_its_scale(tmp_path: Path) -> None:
    raw = load_config_file(REPO / "config" / "demo.yaml")
    config = Config(raw)
    without = copy.deepcopy(raw)
    without.pop("reports")
    for experiment in config.experiments:  # the report entry changes no run cell
        assert Config(without).cells(experiment) == config.cells(experiment)
    assert config.reports["mnist5k_vs_paper"].targets == [
        "reports/mnist5k_vs_paper.md", "reports/mnist5k_vs_paper.pdf",
    ]  # fmt: skip
    paths = [GOLDEN / "demo" / f"mnist5k_{m}.csv" for m in MALFUNCTIONS]
    text = render_report(config, "mnist5k_vs_paper", paths, tmp_path)
    assert "demo (another dataset at CPU scale): NOT a reproduction, not comparable" in text
    assert "NOT comparable" in text.splitlines()[0]
    demo = pd.read_csv(GOLDEN / "demo" / "mnist5k_sfa.csv")
    # FEMNIST SFA k = 4, paper Table 3: FedAvg 1.5 +- 0.3, LIGHTYEAR 89.0 +- 1.4
    assert f"| fedavg | 4 | {cell_text(demo, 'sfa', 'fedavg', 4)} | 1.5 +- 0.3 |" in text
    assert f"| lightyear | 4 | {cell_text(demo, 'sfa', 'lightyear', 4)} | 89.0 +- 1.4 |" in text
    p2p = cell_text(demo, "sfa", "p2p_fedavg", 4)
    assert f"| p2p_fedavg | 4 | {p2p} | - | - | - |" in text  # no paper row for P2P FedAvg


def test_femnist_sample_comparison_states_its_scale(tmp_path: Path) -> None:
    config = Config(load_config_file(REPO / "config" / "femnist_sample.yaml"))
    golden = pd.read_csv(GOLDEN / "femnist_sample_collected.csv")
    paths = []
    for malfunction in MALFUNCTIONS:
        path = tmp_path / f"{malfunction}.csv"
        golden[golden["malfunction"].isin(["none", malfunction])].to_csv(path, index=False)
        paths.append(path)
    text = render_report(config, "femnist_sample_vs_paper", paths, tmp_path)
    assert "CPU sample (smaller data and grid): NOT a reproduction, not comparable" in text
    # the golden CSV holds ANA and SFA: 10 methods x k in {1, 4, 7} x 2 = 60 cells
    assert "| FEMNIST (LEAF sample) | original papers | sample | 60 | 60 | 29 |" in text
    # FEMNIST ANA k = 7, paper Table 2: Krum 70.1 +- 9.1
    ours = cell_text(golden, "ana", "krum", 7)
    assert f"| krum | 7 | {ours} | 70.1 +- 9.1 |" in text
