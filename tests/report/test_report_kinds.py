"""Report kinds: the registry, config validation of report entries, the metric a table shows, the
robustness figure's data, collect's per-metric columns, the demo tables byte for byte, and the
worked example of docs/develop/architecture.md (metrics_table) from config entry to rendered
table."""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, benchlib_exe, tool_env
from helpers.paths import GOLDEN

from benchlib import __version__
from benchlib.configuration.config import Config, load_config_file
from benchlib.configuration.targets import all_targets
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import KINDS, get_kind
from benchlib.report.collect import collect
from benchlib.report.kinds.common.robustness_figure import robustness_frame
from benchlib.report.statistics.table import MetricDisplay

MALFUNCTIONS = ["ana", "sfa", "random", "dynamic"]


def normalised(text: str) -> str:
    return text.replace(f"benchlib {__version__} ", "benchlib VERSION ")


def smoke_raw(**reports) -> dict:
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    if reports:
        raw["reports"] = reports
    return raw


def run_benchlib(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [benchlib_exe(), "-q", *args], capture_output=True, text=True, env=tool_env(), cwd=cwd
    )


# --------------------------------------------------------------------------- synthetic results
# smoke.yaml: experiment smoke, methods local/fedavg/lightyear, malfunctions sfa/ana, k 0..2,
# 4 clients. Per-client values: a base per method, minus 0.1 per malfunctioning client, plus a
# client offset; MSE = 1 - accuracy.
BASE = {"local": 0.5, "fedavg": 0.8, "lightyear": 0.7}
OFFSETS = [0.0, 0.02, 0.04, 0.1]


def accuracy(method: str, k: int, client: int) -> float:
    return BASE[method] - 0.1 * k + OFFSETS[client]


def synthetic_collected(seeds=(0,)) -> pd.DataFrame:
    rows = []
    for malfunction in ("sfa", "ana"):
        for method in BASE:
            for k in (0, 1, 2):
                for seed in seeds:
                    for client in range(4):
                        acc = accuracy(method, k, client) + 0.01 * seed
                        rows.append(
                            {
                                "experiment": "smoke",
                                "dataset": "mnist5k",
                                "malfunction": "none" if k == 0 else malfunction,
                                "method_id": method,
                                "method": method,
                                "k": k,
                                "seed": seed,
                                "client": client,
                                "malicious": client < k,
                                "test_accuracy": acc,
                                "test_mse": 1 - acc,
                                "n_train": 100,
                                "n_val": 20,
                                "n_test": 20,
                            }
                        )
    return pd.DataFrame(rows).drop_duplicates(ignore_index=True)


def expected_cell(method: str, k: int, scale: float, decimals: int, mse: bool = False) -> str:
    values = np.array([accuracy(method, k, c) for c in range(4)])
    values = 1 - values if mse else values
    return f"{scale * values.mean():.{decimals}f} $\\pm$ {scale * values.std():.{decimals}f}"


def body_rows(tex: str) -> dict[str, list[str]]:
    rows = {}
    for line in tex.splitlines():
        if "$\\pm$" in line and line.endswith("\\\\"):
            parts = [p.strip() for p in line.removesuffix("\\\\").split("&")]
            rows[parts[0]] = parts[1:]
    return rows


# ------------------------------------------------------------------------------------ registry
def test_registered_kinds():
    assert {name: get_kind(name).output for name in KINDS.names()} == {
        "agreement_view": "figure",
        "claims": "markdown_numbers",
        "fedagain_bars": "figure",
        "fedagain_box": "figure",
        "fedagain_fig13": "figure",
        "fedagain_table": "table",
        "fedagain_trust": "figure",
        "gamma_figure": "figure",
        "metrics_table": "table",
        "paper_comparison": "markdown",
        "ranking": "figure_numbers",
        "readings": "markdown",
        "robustness_figure": "figure",
        "robustness_table": "table",
        "sample_images": "figure",
        "scale_sensitivity": "figure",
        "segmentation_examples": "figure",
        "tfl_cost_table": "table",
        "tfl_if_oof_figure": "figure",
        "tfl_round_figure": "figure",
        "tfl_similarity_figure": "figure",
        "tfl_table": "table",
        "tfl_time_figure": "figure",
        "tfl_topology_figure": "figure",
        "topology_figure": "figure",
        "training_details": "table",
    }


def test_experiments_yield_the_default_reports():
    config = Config(smoke_raw())
    assert {name: r.kind for name, r in config.reports.items()} == {
        "smoke_sfa": "robustness_table",
        "smoke_ana": "robustness_table",
        "smoke_robustness": "robustness_figure",
    }
    assert all_targets(config) == [
        "tables/smoke_sfa.tex",
        "tables/smoke_ana.tex",
        "figures/smoke_robustness.pdf",
        "figures/smoke_robustness.png",
    ]
    assert config.table_names() == ["smoke_sfa", "smoke_ana"]
    table = config.reports["smoke_sfa"]
    assert table.inputs == ("results/collected/smoke/sfa.csv",)
    assert table.spec == {
        "name": "smoke_sfa",
        "experiment": "smoke",
        "malfunction": "sfa",
        "methods": [["local", "Local"], ["fedavg", "FedAvg"], ["lightyear", "LIGHTYEAR"]],
        "k": [0, 1, 2],
        "title": "smoke test -- SFA",
        "clients": 4,
        "note": "Smoke-test scale; the numbers mean nothing.",
        "metric": "accuracy",
        "metric_label": "accuracy",
        "percent": True,
        "decimals": 1,
    }
    # the figure reads only its malfunctions' collected CSVs
    assert config.reports["smoke_robustness"].inputs == (
        "results/collected/smoke/sfa.csv",
        "results/collected/smoke/ana.csv",
    )


def test_an_entry_named_like_a_default_report_replaces_it():
    config = Config(
        smoke_raw(
            smoke_ana={
                "kind": "robustness_table",
                "experiment": "smoke",
                "malfunction": "ana",
                "metric": "mse",
            }
        )
    )
    assert list(config.reports) == ["smoke_sfa", "smoke_ana", "smoke_robustness"]
    assert config.reports["smoke_ana"].spec["metric"] == "mse"


@pytest.mark.parametrize(
    "entry,message",
    [
        ({"kind": "heatmap"}, "config error at reports.extra.kind: unknown report kind 'heatmap'; "
         "choose one of: agreement_view, claims, fedagain_bars, "),
        ({"kind": "robustness_table", "experiment": "smoke"},
         r"config error at reports.extra \(report kind robustness_table\): malfunction must be "
         "given"),
        ({"kind": "robustness_table", "experiment": "smoke", "malfunction": "ana", "metrc": "x"},
         r"config error at reports.extra \(report kind robustness_table\): unknown parameter "
         r"'metrc' \(did you mean 'metric'\?\); it takes: ci, confidence, decimals, experiment, "
         "malfunction, metric, metric_label, percent, resamples, test, title$"),
        ({"kind": "robustness_table", "experiment": "nope", "malfunction": "ana"},
         "config error at reports.extra: experiment 'nope' is not defined under experiments; "
         "choose one of: smoke"),
        ({"kind": "robustness_table", "experiment": "smoke", "malfunction": "random"},
         "config error at reports.extra: experiment smoke has no malfunction 'random'"),
        ({"kind": "robustness_table", "experiment": "smoke", "malfunction": "ana",
          "decimals": -1}, r"config error at reports.extra \(report kind robustness_table\): "
         "decimals: -1 is less than the minimum"),
        ({"kind": "robustness_table", "experiment": "smoke", "malfunction": "ana",
          "metric": "Test Accuracy"}, r"config error at reports.extra \(report kind "
         r"robustness_table\): metric: 'Test Accuracy' does not match"),
        ({"kind": "robustness_figure", "experiments": []},
         r"config error at reports.extra \(report kind robustness_figure\): experiments: \[\] "
         "should be non-empty"),
        ({"kind": "robustness_figure", "experiments": ["smoke"], "malfunctions": ["dynamic"]},
         "experiment smoke has no malfunction 'dynamic'"),
        ({"kind": "training_details", "experiments": ["other"]},
         "experiment 'other' is not defined under experiments"),
        ({"kind": "metrics_table", "experiment": "smoke", "malfunction": "ana", "k": 5},
         r"experiment smoke has no k=5; choose one of \[0, 1, 2\]"),
        ({"experiment": "smoke"}, "config error at reports.extra: 'kind' is a required property"),
    ],
)  # fmt: skip
def test_bad_report_entries_fail_at_config_load(entry, message):
    with pytest.raises(BenchlibError, match=message) as error:
        Config(smoke_raw(extra=entry))
    assert "\n" not in str(error.value)


def test_a_config_derived_default_given_as_null_is_derived():
    entry = {"kind": "robustness_table", "experiment": "smoke", "malfunction": "ana"}
    omitted = Config(smoke_raw(extra=entry)).reports["extra"].spec
    given_null = Config(smoke_raw(extra={**entry, "title": None})).reports["extra"].spec
    assert given_null == omitted and omitted["title"].endswith(" -- ANA")


def test_report_names_follow_the_id_pattern():
    with pytest.raises(BenchlibError, match="config error at reports"):
        Config(smoke_raw(**{"Fig-3": {"kind": "training_details"}}))


# ------------------------------------------------------------------------------ table metric
def render(report, collected: Path, out: Path) -> str:
    get_kind(report.kind).render(report.spec, [collected], [out])
    return out.read_text()


def test_accuracy_table_from_hand_computed_values(tmp_path):
    csv = tmp_path / "sfa.csv"
    synthetic_collected().to_csv(csv, index=False)
    tex = render(Config(smoke_raw()).reports["smoke_sfa"], csv, tmp_path / "t.tex")
    rows = body_rows(tex)
    assert list(rows) == ["Local", "FedAvg", "LIGHTYEAR"]
    for label, method in (("Local", "local"), ("FedAvg", "fedavg"), ("LIGHTYEAR", "lightyear")):
        assert rows[label] == [expected_cell(method, k, 100, 1) for k in (0, 1, 2)]
    assert rows["FedAvg"][0] == "84.0 $\\pm$ 3.7"  # 80, 82, 84, 90 -> 84.0, sqrt(14) = 3.74
    assert "Average test accuracy (\\%) $\\pm$ std" in tex
    assert "final-round test accuracy, then mean" in tex
    assert "\\label{tab:smoke_sfa}" in tex


def test_mse_table_is_plain_with_three_decimals(tmp_path):
    csv = tmp_path / "sfa.csv"
    synthetic_collected().to_csv(csv, index=False)
    config = Config(
        smoke_raw(
            smoke_sfa_mse={
                "kind": "robustness_table",
                "experiment": "smoke",
                "malfunction": "sfa",
                "metric": "mse",
            }
        )
    )
    tex = render(config.reports["smoke_sfa_mse"], csv, tmp_path / "t.tex")
    rows = body_rows(tex)
    assert rows["FedAvg"] == [expected_cell("fedavg", k, 1, 3, mse=True) for k in (0, 1, 2)]
    assert rows["FedAvg"][0] == "0.160 $\\pm$ 0.037"
    assert "Average test MSE $\\pm$ std of each method" in tex
    assert "final-round test MSE, then mean" in tex and "(\\%)" not in tex
    assert "\\label{tab:smoke_sfa_mse}" in tex


def test_display_options():
    assert MetricDisplay.resolve("dice").mean_std(0.81234, 0.05) == "81.2 $\\pm$ 5.0"
    assert MetricDisplay.resolve("mse", decimals=2).mean_std(0.01234, 0.5) == "0.01 $\\pm$ 0.50"
    assert MetricDisplay.resolve("f1_macro").label == "macro F1"
    assert MetricDisplay.resolve("loss").percent is False
    assert MetricDisplay.resolve("accuracy", percent=False).mean_std(0.5, 0.25) == (
        "0.500 $\\pm$ 0.250"
    )


def test_seeds_are_averaged_per_client_first(tmp_path):
    csv = tmp_path / "sfa.csv"
    synthetic_collected(seeds=(0, 1)).to_csv(csv, index=False)
    tex = render(Config(smoke_raw()).reports["smoke_sfa"], csv, tmp_path / "t.tex")
    # seed 1 adds 0.01 to every client: the per-client mean adds 0.005, the std is unchanged
    values = np.array([accuracy("fedavg", 1, c) + 0.005 for c in range(4)])
    assert (
        body_rows(tex)["FedAvg"][1] == f"{100 * values.mean():.1f} $\\pm$ {100 * values.std():.1f}"
    )
    assert "(averaged over seeds 0, 1 first)" in tex


def test_a_missing_metric_is_a_clear_error(tmp_path):
    csv = tmp_path / "sfa.csv"
    synthetic_collected().drop(columns="test_mse").to_csv(csv, index=False)
    config = Config(
        smoke_raw(
            m={
                "kind": "robustness_table",
                "experiment": "smoke",
                "malfunction": "sfa",
                "metric": "dice",
            }
        )
    )
    with pytest.raises(BenchlibError, match="no test metric 'dice' \\(they have: accuracy\\)"):
        render(config.reports["m"], csv, tmp_path / "t.tex")
    assert not (tmp_path / "t.tex").exists()


# ------------------------------------------------------------------------ golden femnist table
def test_femnist_sample_table_golden(tmp_path):
    config = Config(load_config_file(REPO / "config" / "femnist_sample.yaml"))
    report = config.reports["femnist_sample_ana"]
    tex = render(report, GOLDEN / "femnist_sample_collected.csv", tmp_path / "t.tex")
    assert normalised(tex) == (GOLDEN / "femnist_sample_ana.tex").read_text()


# ----------------------------------------------------------------------------- demo tables
@pytest.mark.parametrize("malfunction", MALFUNCTIONS)
def test_demo_tables_byte_identical_to_the_previous_renderer(tmp_path, malfunction):
    """tests/golden/demo: a `make demo` run's collected CSVs and tables, rendered by benchlib
    before report kinds existed; the CLI must reproduce each table byte for byte."""
    config = Config(load_config_file(REPO / "config" / "demo.yaml"))
    report = config.reports[f"mnist5k_{malfunction}"]
    out = tmp_path / "tables" / f"mnist5k_{malfunction}.tex"
    result = run_benchlib(
        "report", "--kind", report.kind, "--spec", json.dumps(report.spec),
        "--collected", str(GOLDEN / "demo" / f"mnist5k_{malfunction}.csv"), "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    golden = (GOLDEN / "demo" / f"mnist5k_{malfunction}.tex").read_text()
    assert normalised(out.read_text()) == golden


# ---------------------------------------------------------------------------------- figures
def test_robustness_figure_data_and_files(tmp_path):
    frame = synthetic_collected()
    raw = smoke_raw(
        both={
            "kind": "robustness_figure",
            "experiments": ["smoke", "smoke2"],
            "std": True,
            "malfunctions": ["ana"],
            "title": "Two experiments",
        }
    )
    raw["experiments"]["smoke2"] = {**raw["experiments"]["smoke"], "title": "second"}
    config = Config(raw)
    spec = config.reports["both"].spec
    assert [p["experiment"] for p in spec["panels"]] == ["smoke", "smoke2"]
    assert config.reports["both"].inputs == (
        "results/collected/smoke/ana.csv",
        "results/collected/smoke2/ana.csv",
    )
    second = frame.assign(experiment="smoke2", test_accuracy=frame["test_accuracy"] / 2)
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    frame.to_csv(paths[0], index=False)
    second.to_csv(paths[1], index=False)
    data = robustness_frame(pd.concat([frame, second]), spec["panels"], MetricDisplay.resolve())
    fedavg = data[(data["method"] == "FedAvg") & (data["k"] == 1)].set_index("experiment")
    values = np.array([accuracy("fedavg", 1, c) for c in range(4)])
    assert fedavg.loc["smoke test", "value"] == pytest.approx(100 * values.mean())
    assert fedavg.loc["second", "value"] == pytest.approx(50 * values.mean())
    assert fedavg.loc["second", "spread"] == pytest.approx(50 * values.std())
    assert set(data["malfunction"]) == {"ANA"}
    outs = [tmp_path / "fig.pdf", tmp_path / "fig.png"]
    get_kind("robustness_figure").render(spec, paths, outs)
    assert outs[0].read_bytes().startswith(b"%PDF") and outs[1].read_bytes()[1:4] == b"PNG"


def test_report_command_errors(tmp_path):
    spec = json.dumps(Config(smoke_raw()).reports["smoke_sfa"].spec)
    csv = tmp_path / "sfa.csv"
    synthetic_collected().to_csv(csv, index=False)
    result = run_benchlib(
        "report", "--kind", "robustness_table", "--spec", spec, "--collected", str(csv),
        "--out", str(tmp_path / "t.pdf"),
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: report kind robustness_table writes .tex files; pass --out with 1 path(s) "
        "ending in .tex in that order"
    ]
    assert not (tmp_path / "t.pdf").exists()
    result = run_benchlib("report", "--kind", "pie", "--spec", "{}", "--out", "x.tex")
    assert result.returncode == 2 and "unknown report kind 'pie'; choose one of" in result.stderr
    result = run_benchlib(
        "report", "--kind", "robustness_table", "--spec", "{}", "--collected", str(csv),
        "--out", str(tmp_path / "t.tex"),
    )  # fmt: skip
    assert result.returncode == 2 and "--spec lacks 'experiment'" in result.stderr


# ---------------------------------------------------------------------------------- collect
def write_metrics(path: Path, cell: dict, clients: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cell": cell, "clients": clients, "history": {}}))
    return path


def test_collect_has_one_column_per_test_metric(tmp_path):
    golden = pd.read_csv(GOLDEN / "femnist_sample_collected.csv")
    ids = ["experiment", "dataset", "malfunction", "method_id", "method", "k", "seed"]
    paths = []
    for i, (key, group) in enumerate(golden.groupby(ids, sort=False)):
        clients = group.drop(columns=ids).to_dict("records")
        cell = {k: getattr(v, "item", lambda v=v: v)() for k, v in zip(ids, key, strict=True)}
        paths.append(write_metrics(tmp_path / f"{i}/metrics.json", cell, clients))
    frame = collect(paths)
    # only test_accuracy: the same columns and values as before metrics became columns
    assert list(frame.columns) == list(golden.columns)
    expected = golden.sort_values(["experiment", "malfunction", "method_id", "k", "seed", "client"])
    np.testing.assert_array_equal(frame["test_accuracy"], expected["test_accuracy"])
    # more metrics: sorted test_* columns where test_accuracy was; other keys stay out
    cell = {k: v for k, v in zip(ids, ["e", "d", "none", "m", "m", 0, 0], strict=True)}
    extra = write_metrics(
        tmp_path / "x/metrics.json",
        cell,
        [{"client": 0, "malicious": False, "test_f1_macro": 0.5, "test_accuracy": 0.75,
          "test_per_class": [1, 2], "val_accuracy": 0.1, "n_train": 1, "n_val": 1, "n_test": 1}],
    )  # fmt: skip
    frame = collect([extra])
    assert list(frame.columns)[8:] == [
        "malicious", "test_accuracy", "test_f1_macro", "n_train", "n_val", "n_test",
    ]  # fmt: skip
    assert frame["test_f1_macro"].tolist() == [0.5]


# --------------------------------------------------- worked example: docs/develop/architecture.md
EXAMPLE = {
    "smoke_metrics": {
        "kind": "metrics_table",
        "experiment": "smoke",
        "malfunction": "ana",
        "k": 2,
        "metrics": ["accuracy", "mse"],
    }
}


@pytest.mark.workflow
@pytest.mark.slow  # runs snakemake -n
def test_worked_example_metrics_table_end_to_end(tmp_path):
    """Config entry -> `benchlib targets` lists it -> snakemake plans it -> it renders."""
    config_file = tmp_path / "example.yaml"
    config_file.write_text(yaml.safe_dump(smoke_raw(**copy.deepcopy(EXAMPLE)), sort_keys=False))
    targets = run_benchlib("targets", str(config_file))
    assert targets.returncode == 0, targets.stderr
    assert "tables/smoke_metrics.tex" in targets.stdout.splitlines()

    plan = subprocess.run(
        ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path / "work"), "-n",
         "tables/smoke_metrics.tex", "--configfile", str(config_file)],
        capture_output=True, text=True, env=tool_env(), timeout=300,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", plan.stdout, flags=re.M))
    assert stats["render_table"] == "1" and stats["collect_table_results"] == "1"
    assert stats["run_cell"] == "9"  # 3 methods x (k = 0, shared; k = 1, 2 under ANA)

    specs = run_benchlib("targets", "--specs", str(config_file)).stdout.splitlines()
    line = next(s for s in specs if s.startswith("tables/smoke_metrics.tex\t"))
    _, kind, inputs, spec = line.split("\t")
    assert (kind, inputs) == ("metrics_table", "results/collected/smoke/ana.csv")
    csv = tmp_path / "ana.csv"
    synthetic_collected().to_csv(csv, index=False)
    out = tmp_path / "tables" / "smoke_metrics.tex"
    result = run_benchlib(
        "report", "--kind", kind, "--spec", spec, "--collected", str(csv), "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    tex = out.read_text()
    assert "Method & accuracy (\\%) & MSE \\\\" in tex
    assert body_rows(tex) == {
        label: [expected_cell(method, 2, 100, 1), expected_cell(method, 2, 1, 3, mse=True)]
        for label, method in (("Local", "local"), ("FedAvg", "fedavg"), ("LIGHTYEAR", "lightyear"))
    }
    assert body_rows(tex)["FedAvg"] == ["64.0 $\\pm$ 3.7", "0.360 $\\pm$ 0.037"]
    assert "across all 4 clients, 2 of them malfunctioning (ANA) and included" in tex


# ------------------------------------------------------------------------- diverged cells
def test_collect_and_the_table_mark_a_diverged_cell(tmp_path):
    """A cell whose models went non-finite keeps its (meaningless) number, but the collected
    CSV counts its non-finite models and the table puts a dagger on its value and a note."""
    frame = synthetic_collected()
    paths = []
    ids = ["experiment", "dataset", "malfunction", "method_id", "method", "k", "seed"]
    for i, (key, group) in enumerate(frame.groupby(ids, sort=False)):
        cell = {k: getattr(v, "item", lambda v=v: v)() for k, v in zip(ids, key, strict=True)}
        clients = group.drop(columns=ids).to_dict("records")
        path = write_metrics(tmp_path / f"{i}/metrics.json", cell, clients)
        if cell["method_id"] == "fedavg" and cell["k"] == 2 and cell["malfunction"] == "sfa":
            metrics = json.loads(path.read_text())
            metrics["history"]["nonfinite"] = [{"round": 0, "model": "global"}] * 3
            path.write_text(json.dumps(metrics))
        paths.append(path)
    collected = collect(paths)
    marked = collected[collected["nonfinite"] > 0]
    cells = zip(marked["method_id"], marked["k"], marked["malfunction"], strict=True)
    assert set(cells) == {("fedavg", 2, "sfa")}
    assert marked["nonfinite"].tolist() == [3] * 4 and collected["nonfinite"].sum() == 12
    csv = tmp_path / "sfa.csv"
    collected.to_csv(csv, index=False)
    tex = render(Config(smoke_raw()).reports["smoke_sfa"], csv, tmp_path / "t.tex")
    rows = body_rows(tex)
    assert rows["FedAvg"][2] == expected_cell("fedavg", 2, 100, 1) + "$^{\\dagger}$"
    from benchlib.report.html_table import inline

    assert inline(rows["FedAvg"][2]).endswith("<sup>†</sup>")  # the HTML report shows it too
    assert rows["FedAvg"][:2] == [expected_cell("fedavg", k, 100, 1) for k in (0, 1)]
    assert not any("dagger" in cell for label in ("Local", "LIGHTYEAR") for cell in rows[label])
    assert "$^{\\dagger}$ Includes 1 diverged cell (non-finite model weights" in tex
    # the ana table has none: no mark, no note
    tex = render(Config(smoke_raw()).reports["smoke_ana"], csv, tmp_path / "a.tex")
    assert "dagger" not in tex
    # the metrics table at k=2 and the robustness figure's data mark the same cell
    entry = {"kind": "metrics_table", "experiment": "smoke", "malfunction": "sfa", "k": 2,
             "metrics": ["accuracy", "mse"]}  # fmt: skip
    tex = render(Config(smoke_raw(m=entry)).reports["m"], csv, tmp_path / "m.tex")
    rows = body_rows(tex)
    assert all(cell.endswith("$^{\\dagger}$") for cell in rows["FedAvg"])
    assert not any("dagger" in cell for cell in rows["Local"] + rows["LIGHTYEAR"])
    assert "Includes 1 diverged cell" in tex
    panels = [{"experiment": "smoke", "title": "s", "malfunctions": ["sfa"],
               "methods": [["fedavg", "FedAvg"], ["local", "Local"]]}]  # fmt: skip
    data = robustness_frame(collected, panels, MetricDisplay.resolve())
    marked = data[data["diverged"] > 0]
    assert list(zip(marked["method"], marked["k"], strict=True)) == [("FedAvg", 2)]
    from benchlib.report.kinds.common.robustness_figure import plot_robustness

    plot_robustness(data, "t", tmp_path / "f.pdf", tmp_path / "f.png")  # dagger and note drawn
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("{}", "is not a cell's metrics file (it lacks the cell or its clients)"),
        ("[]", "is not a cell's metrics file"),
        ('{"cell": {}, "clients": [1]}', "is not a cell's metrics file"),
        ("\udcff", "is not valid JSON"),
    ],
)
def test_collect_over_a_broken_metrics_file_is_one_error(tmp_path, text, phrase):
    path = tmp_path / "metrics.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    out = tmp_path / "c.csv"
    result = run_benchlib("collect", "--out", str(out), str(path))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: ") and phrase in result.stderr
    assert not out.exists()
