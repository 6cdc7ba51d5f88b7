"""The ranking report kind: config entry to spec and targets, and the rendered figure plus its CSV
of numbers on hand-made collected results (values computed here by hand), on the metric's
direction, with too few methods, with a missing cell, and on the demo's collected results."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import REPO, benchlib_exe, tool_env
from helpers.paths import GOLDEN

from benchlib.configuration.config import Config, load_config_file
from benchlib.primitives.errors import BenchlibError
from benchlib.report.kinds.common.ranking import caption_lines, compute

# smoke.yaml: experiment smoke, methods local/fedavg/lightyear, malfunctions sfa/ana, k 0..2,
# 4 clients. Accuracy: a base per method, minus 0.1 per malfunctioning client, plus a client
# offset (mean 0.04); MSE = 1 - accuracy.
BASE = {"local": 0.5, "fedavg": 0.8, "lightyear": 0.7}
OFFSETS = [0.0, 0.02, 0.04, 0.1]


def collected(seeds=(0,), drop=()) -> pd.DataFrame:
    rows = []
    for malfunction in ("sfa", "ana"):
        for method, base in BASE.items():
            for k in (0, 1, 2):
                cell_malfunction = "none" if k == 0 else malfunction
                if (method, cell_malfunction, k) in drop:
                    continue
                for seed in seeds:
                    for client, offset in enumerate(OFFSETS):
                        accuracy = base - 0.1 * k + offset + 0.01 * seed
                        rows.append(
                            {
                                "experiment": "smoke", "dataset": "mnist5k",
                                "malfunction": cell_malfunction, "method_id": method,
                                "method": method, "k": k, "seed": seed, "client": client,
                                "malicious": client < k, "test_accuracy": accuracy,
                                "test_mse": 1 - accuracy, "n_train": 100, "n_val": 20,
                                "n_test": 20,
                            }
                        )  # fmt: skip
    return pd.DataFrame(rows).drop_duplicates(ignore_index=True)


def config(**entry) -> Config:
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["reports"] = {"smoke_ranking": {"kind": "ranking", "experiments": ["smoke"], **entry}}
    return Config(raw)


def render(tmp_path: Path, frame: pd.DataFrame, **entry) -> tuple[pd.DataFrame, list[Path]]:
    """Render through the CLI as the workflow does; the CSV of numbers and the three outputs."""
    report = config(**entry).reports["smoke_ranking"]
    inputs = []
    for malfunction in ("sfa", "ana"):
        path = tmp_path / f"{malfunction}.csv"
        frame[frame["malfunction"].isin([malfunction, "none"])].to_csv(path, index=False)
        inputs.append(str(path))
    outputs = [tmp_path / Path(t).name for t in report.targets]
    result = subprocess.run(
        [benchlib_exe(), "-q", "report", "--kind", "ranking", "--spec", json.dumps(report.spec),
         "--collected", *inputs, "--out", *map(str, outputs)],
        capture_output=True, text=True, env=tool_env(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return pd.read_csv(outputs[2]), outputs


def test_entry_resolves_to_targets_inputs_and_spec():
    report = config().reports["smoke_ranking"]
    assert report.targets == [
        "figures/smoke_ranking.pdf", "figures/smoke_ranking.png", "figures/smoke_ranking.csv",
    ]  # fmt: skip
    assert report.inputs == ("results/collected/smoke/sfa.csv", "results/collected/smoke/ana.csv")
    assert report.spec["methods"] == [
        ["local", "Local"], ["fedavg", "FedAvg"], ["lightyear", "LIGHTYEAR"],
    ]  # fmt: skip
    assert report.spec["posthoc"] == "nemenyi" and report.spec["resamples"] == 2000
    only_ana = config(malfunctions=["ana"], methods=["fedavg", "local"]).reports["smoke_ranking"]
    assert only_ana.inputs == ("results/collected/smoke/ana.csv",)
    assert [m for m, _ in only_ana.spec["methods"]] == ["fedavg", "local"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"methods": ["fedavgg"]},
            "method 'fedavgg' is in none of the experiments smoke; "
            "choose from: local, fedavg, lightyear",
        ),
        ({"malfunctions": ["nope"]}, "experiment smoke has no malfunction 'nope'"),
        ({"posthoc": "tukey"}, "posthoc"),
    ],
)
def test_bad_entries_stop_at_config_load(entry, message):
    with pytest.raises(BenchlibError, match=message):
        config(**entry)


def test_figure_and_numbers_from_hand_computed_values(tmp_path):
    numbers, outputs = render(tmp_path, collected())
    assert outputs[0].read_bytes().startswith(b"%PDF")
    assert outputs[1].read_bytes().startswith(b"\x89PNG")
    # every block ranks fedavg > lightyear > local
    assert list(numbers["method_id"]) == ["fedavg", "lightyear", "local"]
    assert list(numbers["mean_rank"]) == [1.0, 2.0, 3.0]
    assert set(numbers["blocks"]) == {5} and set(numbers["blocks_left_out"]) == {0}
    # 5 blocks (k = 0 once, sfa and ana at k = 1, 2), rank sums 5, 10, 15:
    # chi2 = 12 / (5 * 3 * 4) * (25 + 100 + 225) - 3 * 5 * 4 = 10, p = exp(-5)
    assert numbers["friedman_statistic"].iloc[0] == pytest.approx(10.0)
    assert numbers["friedman_p"].iloc[0] == pytest.approx(math.exp(-5))
    assert numbers["cd"].iloc[0] == pytest.approx(2.343 * math.sqrt(12 / 30), abs=1e-3)
    # FedAvg's block values (%): 84 (k = 0), 74, 74, 64, 64; the IQM cuts one from each end
    assert numbers["iqm"].iloc[0] == pytest.approx((64 + 74 + 74) / 3)
    assert (numbers["iqm_low"] <= numbers["iqm"]).all()
    assert (numbers["iqm"] <= numbers["iqm_high"]).all()
    # Nemenyi: fedavg vs local, 2 ranks apart > CD, differ; neighbours, 1 apart < CD, do not
    fedavg = numbers.set_index("method_id").loc["fedavg"]
    assert fedavg["p_local"] < 0.05 < fedavg["p_lightyear"] and fedavg["p_fedavg"] == 1
    (tmp_path / "again").mkdir()
    again, _ = render(tmp_path / "again", collected())
    assert again.equals(numbers)  # seeded bootstrap: the same numbers again


def test_the_ranking_follows_the_metric_direction(tmp_path):
    numbers, _ = render(tmp_path, collected(), metric="mse")
    # lower MSE is better: FedAvg (MSE 0.16 at k = 0) still ranks first
    assert list(numbers["method_id"]) == ["fedavg", "lightyear", "local"]
    assert numbers["iqm"].iloc[0] == pytest.approx(1 - (0.64 + 0.74 + 0.74) / 3)
    spec = config(metric="mse").reports["smoke_ranking"].spec
    assert "lower is better" in caption_lines(spec, compute(spec, collected()))[0]


def test_the_caption_states_what_the_blocks_are(tmp_path):
    spec = config().reports["smoke_ranking"].spec
    one_seed = caption_lines(spec, compute(spec, collected()))
    assert one_seed[0].startswith("Blocks: N = 5 cells (malfunction, k, seed)")
    assert "One seed (0): the blocks are malfunction x k only" in one_seed[1]
    assert "Friedman chi2(2) = 10.00" in one_seed[2]
    two_seeds = caption_lines(spec, compute(spec, collected(seeds=(0, 1))))
    assert two_seeds[0].startswith("Blocks: N = 10 cells")
    assert not any("One seed" in line for line in two_seeds)


def test_too_few_methods_renders_and_says_so(tmp_path):
    numbers, outputs = render(tmp_path, collected(), methods=["fedavg", "local"])
    assert outputs[0].stat().st_size > 0 and outputs[1].stat().st_size > 0
    assert list(numbers["mean_rank"]) == [1.0, 2.0]
    assert numbers["friedman_p"].isna().all() and numbers["cd"].isna().all()
    spec = config(methods=["fedavg", "local"]).reports["smoke_ranking"].spec
    lines = caption_lines(spec, compute(spec, collected()))
    assert "Friedman test not run: 2 method(s), the tests need at least 3" in " ".join(lines)


def test_a_missing_cell_is_listed_never_dropped_silently(tmp_path):
    frame = collected(drop=[("lightyear", "ana", 2)])
    numbers, outputs = render(tmp_path, frame)
    assert set(numbers["blocks"]) == {4} and set(numbers["blocks_left_out"]) == {1}
    spec = config().reports["smoke_ranking"].spec
    lines = caption_lines(spec, compute(spec, frame))
    assert "ana k=2 seed=0: no value for lightyear; left out" in lines
    assert outputs[1].stat().st_size > 0


def test_a_diverged_cell_is_stated_in_the_figure_and_counted_in_the_numbers(tmp_path):
    frame = collected()
    diverged = (frame["method_id"] == "fedavg") & (frame["malfunction"] == "sfa")
    frame = frame.assign(nonfinite=(diverged & (frame["k"] == 2)).astype(int))
    numbers, _ = render(tmp_path, frame)
    counts = dict(zip(numbers["method_id"], numbers["diverged_blocks"], strict=True))
    assert counts == {"local": 0, "fedavg": 1, "lightyear": 0}
    spec = config().reports["smoke_ranking"].spec
    lines = caption_lines(spec, compute(spec, frame))
    assert "\u2020 fedavg diverged (non-finite models) in 1 ranked block (sfa k=2 seed=0)" in (
        " ".join(lines)
    )


def demo_mean_ranks(frame: pd.DataFrame) -> dict[str, float]:
    """Independently of the kind: per (malfunction, k, seed) cell, the methods' mean client
    accuracy ranked with pandas (highest = 1, ties averaged), averaged over the cells."""
    cells = frame.groupby(["malfunction", "k", "seed", "method_id"])["test_accuracy"].mean()
    ranks = cells.groupby(level=["malfunction", "k", "seed"]).rank(ascending=False)
    return ranks.groupby(level="method_id").mean().to_dict()


def test_the_demo_ranking(tmp_path):
    """tests/golden/demo: the collected CSVs of a `make demo` run (4 methods, 29 blocks)."""
    report = Config(load_config_file(REPO / "config" / "demo.yaml")).reports["mnist5k_ranking"]
    paths = [GOLDEN / "demo" / f"mnist5k_{m}.csv" for m in ("ana", "sfa", "random", "dynamic")]
    frame = pd.concat([pd.read_csv(p) for p in paths]).drop_duplicates(ignore_index=True)
    ranking = compute(report.spec, frame)
    assert ranking.mean_ranks.to_dict() == pytest.approx(demo_mean_ranks(frame))
    assert len(ranking.blocks.scores) == 29 and ranking.blocks.left_out == []
    assert ranking.order[0] == "lightyear"
    assert ranking.cd == pytest.approx(0.871, abs=1e-3)
    lines = caption_lines(report.spec, ranking)
    assert "One seed (0): the blocks are malfunction x k only" in lines[1]


@pytest.mark.workflow
@pytest.mark.slow
def test_the_demo_ranking_target_plans_the_demo_cells(tmp_path):
    result = subprocess.run(
        ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n",
         f"--configfile={REPO / 'config' / 'demo.yaml'}", "figures/mnist5k_ranking.pdf"],
        env=tool_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    counts = dict(
        line.split()[:2]
        for line in result.stdout.splitlines()
        if len(line.split()) == 2 and line.split()[1].isdigit()
    )
    assert counts["render_figure_numbers"] == "1" and counts["run_cell"] == "116"
    assert counts["collect_table_results"] == "4"


def test_the_readme_states_the_demo_ranking():
    report = Config(load_config_file(REPO / "config" / "demo.yaml")).reports["mnist5k_ranking"]
    paths = [GOLDEN / "demo" / f"mnist5k_{m}.csv" for m in ("ana", "sfa", "random", "dynamic")]
    frame = pd.concat([pd.read_csv(p) for p in paths]).drop_duplicates(ignore_index=True)
    ranking = compute(report.spec, frame)
    labels = dict(tuple(m) for m in report.spec["methods"])
    aggregate = ranking.aggregate
    readme = (REPO / "README.md").read_text()
    for method in ranking.order:
        point, low, high = (
            100 * s[method] for s in (aggregate.point, aggregate.low, aggregate.high)
        )
        rank = ranking.mean_ranks[method]
        assert f"| {labels[method]} | {rank:.2f} | {point:.1f} [{low:.1f}, {high:.1f}] |" in readme
    stat, p = ranking.friedman.statistic, ranking.friedman.p_value
    assert f"Friedman chi2(3) = {stat:.1f}, p = {p:.2g}, Nemenyi CD = {ranking.cd:.2f}." in readme


@pytest.mark.workflow
@pytest.mark.slow
def test_the_html_report_shows_the_ranking_figure_and_its_numbers(tmp_path):
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["reports"] = {"smoke_ranking": {"kind": "ranking", "experiments": ["smoke"]}}
    config_file = tmp_path / "c.yaml"
    config_file.write_text(yaml.safe_dump(raw))
    (tmp_path / "work" / "figures").mkdir(parents=True)
    _, outputs = render(tmp_path, collected())
    for output in outputs:  # as if the workflow had rendered them
        output.rename(tmp_path / "work" / "figures" / output.name)
    out = tmp_path / "report.html"
    result = subprocess.run(
        [benchlib_exe(), "html-report", "--config", str(config_file), "-d", str(tmp_path / "work"),
         "--out", str(out), "--snakefile", str(REPO / "Snakefile"), "--cores", "1"],
        env=tool_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    page = out.read_text()
    for suffix in ("png", "csv"):  # results of the report (the PNG shown, the CSV attached)
        assert f'"figures/smoke_ranking.{suffix}": {{"name": "smoke_ranking.{suffix}"' in page
