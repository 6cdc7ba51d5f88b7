"""TFL Table 6 and Figures 1, 2, 4, 6, 7, 8 through the whole Snakemake chain at toy scale: an
eICU run from a synthetic CSV in eICU's bring-your-own format (4 regions x 2 hospitals) and a
leave-one-domain-out run on the real PACS sample. The numbers in each output are checked against
the runs' own metrics.json and timing.json files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO, ops_snakemake

from benchlib.configuration.config import Config, load_config_file
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind

SAMPLE = REPO.parent / "shared" / "data" / "pacs_sample"
REGIONS = ["MIDWEST", "MIDWEST", "NORTHEAST", "NORTHEAST", "SOUTH", "SOUTH", "WEST", "WEST"]


def eicu_csv(path: Path) -> Path:
    """80 stays per hospital, 6 numeric features; mortality depends on two of them."""
    rng = np.random.default_rng(0)
    frames = []
    for h, region in enumerate(REGIONS):
        x = rng.normal(loc=0.3 * h, size=(80, 6))
        risk = x[:, 0] - x[:, 1] + rng.normal(scale=0.5, size=80)
        died = (risk > np.quantile(risk, 0.6)).astype(int)  # 40 % die: both classes everywhere
        frame = pd.DataFrame(x, columns=[f"drug_{i}" for i in range(6)])
        frame.insert(0, "hospitalid", 100 + h)
        frame.insert(1, "region", region)
        frame["hospital_mortality"] = died
        frames.append(frame)
    pd.concat(frames).to_csv(path, index=False)
    return path


def eicu_config(csv: Path) -> dict:
    return {
        "datasets": {
            "eicu": {
                "source": "eicu", "params": {"path": str(csv)}, "clients": 8,
                "partition": {"name": "groups"}, "split": {"val": 0.1, "test": 0.3, "seed": 0},
                "held_out": [6, 7], "model": {"name": "mlp", "params": {"hidden": [8]}},
                "training": {"optimizer": "sgd", "lr": 0.05, "batch_size": 32,
                             "local_epochs": 1, "rounds": 3, "round_metrics": ["roc_auc"]},
            }
        },
        "methods": {
            "fedavg": {"label": "FedAvg"},
            "tfl": {"label": "TFL", "params": {"update_every": 1}},
            "tfl_kmeans": {"method": "tfl", "label": "TFL w/ Clustering",
                           "params": {"update_every": 1, "clusters": 2}},
        },
        "experiments": {
            "eicu": {"dataset": "eicu", "methods": ["fedavg", "tfl", "tfl_kmeans"],
                     "malfunctions": ["none"], "k": [0], "seeds": [0]},
            "loro": {"dataset": "eicu", "methods": ["fedavg", "tfl"], "malfunctions": ["none"],
                     "k": [0], "seeds": [0], "default_reports": False,
                     "axes": {"held_out": [[2, 3]]}},
        },
        "reports": {
            "t6": {"kind": "tfl_cost_table", "experiment": "eicu",
                   "methods": ["fedavg", "tfl", "tfl_kmeans"], "metric": "roc_auc",
                   "quoted": {"tfl": {"value": 58.41, "std": 0.06, "seconds": 437.61}}},
            "f1": {"kind": "tfl_if_oof_figure", "methods": ["fedavg", "tfl"],
                   "panels": [{"label": "WEST held out", "experiment": "eicu"}]},
            "f6": {"kind": "tfl_topology_figure", "experiment": "eicu", "method": "tfl",
                   "node_groups": {"MIDWEST": [0, 1], "NORTHEAST": [2, 3], "SOUTH": [4, 5]}},
            "f7": {"kind": "tfl_round_figure", "experiment": "eicu",
                   "methods": ["fedavg", "tfl", "tfl_kmeans"]},
            "f8": {"kind": "tfl_if_oof_figure", "methods": ["fedavg", "tfl"],
                   "panels": [{"label": "NORTHEAST", "experiment": "loro__held_out_2_3"},
                              {"label": "WEST", "experiment": "eicu"}]},
        },
    }  # fmt: skip


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def oof_mean(metrics: dict, column: str = "test_roc_auc", key: str = "held_out_clients") -> float:
    values = [c[column] for c in metrics[key] if c[column] is not None]
    return sum(values) / len(values)


@pytest.mark.workflow
def test_eicu_cost_table_and_figures_from_a_synthetic_csv(tmp_path):
    raw = eicu_config(eicu_csv(tmp_path / "stays.csv"))
    config_path = tmp_path / "eicu.yaml"
    config_path.write_text(yaml.safe_dump(raw))
    targets = ["tables/t6.tex", *[f"figures/{f}.pdf" for f in ("f1", "f6", "f7", "f8")]]
    result = ops_snakemake(tmp_path, config_path, "-c1", "--", *targets)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = tmp_path / "results" / "runs"

    def cell(experiment: str, method: str) -> Path:
        return runs / experiment / "none" / method / "k0" / "seed0"

    # Table 6: the pooled OOF ROC-AUC (as every TFL table scores) and the summed round times of
    # each cell, as the runs wrote them
    text = (tmp_path / "tables" / "t6.tex").read_text()
    for method, label in (
        ("fedavg", "FedAvg"),
        ("tfl", "TFL"),
        ("tfl_kmeans", "TFL w/ Clustering"),
    ):
        metrics = read(cell("eicu", method) / "metrics.json")
        timing = read(cell("eicu", method) / "timing.json")
        assert len(timing["round_seconds"]) == 3
        seconds = sum(timing["round_seconds"])
        pooled = metrics["pooled"]["oof"]["roc_auc"]
        row = f"{label} & {100 * pooled:.2f} & {seconds:.2f} & {seconds / 3:.3f} \\\\"
        assert row in text, (row, text)
    assert r"TFL & 58.41 $\pm$ 0.06 & 437.61 & -- \\" in text
    kmeans = read(cell("eicu", "tfl_kmeans") / "metrics.json")["method_summary"]
    assert all(len(set(t["clusters"])) == 2 for t in kmeans["topology"])

    # Figure 7: per-round OOF ROC-AUC; the last round equals the final held-out score
    config = Config(load_config_file(config_path))
    report = config.reports["f7"]
    inputs = [tmp_path / p for p in report.inputs]
    lines = {
        line.get_label(): line.get_ydata()
        for line in get_kind("tfl_round_figure").draw(report.spec, inputs).axes[0].get_lines()
    }
    for method, label in (("fedavg", "FedAvg"), ("tfl", "TFL")):
        metrics = read(cell("eicu", method) / "metrics.json")
        per_round = [
            np.mean([c["roc_auc"] for c in r["held_out_clients"]])
            for r in metrics["history"]["round_metrics"]
        ]
        np.testing.assert_allclose(lines[label], 100 * np.array(per_round))
        assert lines[label][-1] == pytest.approx(100 * oof_mean(metrics))

    # Figure 8: one panel per held-out region; bars = IF and OOF means of that variant's cells
    from matplotlib.container import BarContainer

    report = config.reports["f8"]
    figure = get_kind("tfl_if_oof_figure").draw(report.spec, [tmp_path / p for p in report.inputs])
    assert [ax.get_title() for ax in figure.axes] == ["NORTHEAST", "WEST"]
    bars = {
        (ax.get_title(), c.get_label()): [p.get_height() for p in c.patches]
        for ax in figure.axes
        for c in ax.containers
        if isinstance(c, BarContainer)
    }
    for panel, experiment in (("NORTHEAST", "loro__held_out_2_3"), ("WEST", "eicu")):
        expected_if, expected_oof = [], []
        for method in ("fedavg", "tfl"):
            metrics = read(cell(experiment, method) / "metrics.json")
            expected_if.append(100 * oof_mean(metrics, key="clients"))
            expected_oof.append(100 * oof_mean(metrics))
        assert bars[(panel, "IF")] == pytest.approx(expected_if)
        assert bars[(panel, "OOF")] == pytest.approx(expected_oof)
    held = read(cell("loro__held_out_2_3", "tfl") / "metrics.json")["held_out_clients"]
    assert [c["client"] for c in held] == [2, 3]
    summary = read(cell("eicu", "tfl") / "metrics.json")["method_summary"]
    assert summary["federation"] == [0, 1, 2, 3, 4, 5]
    for name in ("f1", "f6"):
        assert (tmp_path / "figures" / f"{name}.png").stat().st_size > 0


def pacs_config() -> dict:
    return {
        "datasets": {
            "pacs": {
                "source": "pacs_local",
                "params": {"path": str(SAMPLE), "expected_images": 840, "image_size": 8,
                           "clients_per_domain": 2},
                "clients": 8, "partition": {"name": "groups"},
                "split": {"val": 0.1, "test": 0.2, "seed": 0},
                "model": {"name": "fedavg_cnn", "params": {"channels": [2, 4], "hidden": 8}},
                "training": {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 64,
                             "local_epochs": 1, "rounds": 2},
            }
        },
        "methods": {"fedavg": {"label": "FedAvg"},
                    "tfl": {"label": "TFL", "params": {"update_every": 1}}},
        "experiments": {"lodo": {"dataset": "pacs", "methods": ["fedavg", "tfl"],
                                 "malfunctions": ["none"], "k": [0], "seeds": [0],
                                 "axes": {"held_out": [[4, 5], [6, 7]]}}},
        "reports": {
            "f2": {"kind": "tfl_time_figure", "methods": ["fedavg", "tfl"],
                   "experiments": ["lodo__held_out_4_5", "lodo__held_out_6_7"]},
            "f4": {"kind": "tfl_similarity_figure", "experiment": "lodo__held_out_6_7",
                   "method": "tfl", "reference": 3},
        },
    }  # fmt: skip


@pytest.mark.workflow
def test_pacs_time_and_similarity_figures_from_a_real_run(tmp_path):
    config_path = tmp_path / "pacs.yaml"
    config_path.write_text(yaml.safe_dump(pacs_config()))
    result = ops_snakemake(tmp_path, config_path, "-c1", "--", "figures/f2.pdf", "figures/f4.pdf")
    assert result.returncode == 0, result.stderr[-3000:]
    config = Config(load_config_file(config_path))
    runs = tmp_path / "results" / "runs"

    # Figure 2: x = mean summed round time over the method's cells, y = mean OOF accuracy
    report = config.reports["f2"]
    figure = get_kind("tfl_time_figure").draw(report.spec, [tmp_path / p for p in report.inputs])
    drawn = {c.get_label(): c.get_offsets()[0].tolist() for c in figure.axes[0].collections}
    for method, label in (("fedavg", "FedAvg"), ("tfl", "TFL")):
        seconds, scores = [], []
        for held in ("4_5", "6_7"):
            folder = runs / f"lodo__held_out_{held}" / "none" / method / "k0" / "seed0"
            seconds.append(sum(read(folder / "timing.json")["round_seconds"]))
            scores.append(100 * oof_mean(read(folder / "metrics.json"), "test_accuracy"))
        assert drawn[label] == pytest.approx([np.mean(seconds), np.mean(scores)])

    # Figure 4: client 3's similarity to the other federation clients, each measure min-max
    report = config.reports["f4"]
    metrics = read(runs / "lodo__held_out_6_7" / "none" / "tfl" / "k0" / "seed0" / "metrics.json")
    sims = metrics["method_summary"]["similarities"]
    # the clients that transmitted a model at least once (TFL draws by lambda, with replacement)
    # (history.participants lists only the rounds in which not every client took part)
    drawn = metrics["history"]["participants"]
    full = len(drawn) < len(metrics["history"]["val_accuracy"])
    expected = list(range(6)) if full else sorted(set().union(*drawn))
    assert sims["clients"] == expected and 3 in sims["clients"]
    ref = sims["clients"].index(3)
    image = (
        get_kind("tfl_similarity_figure")
        .draw(report.spec, [tmp_path / p for p in report.inputs])
        .axes[0]
        .get_images()[0]
    )
    data = np.ma.filled(image.get_array(), np.nan)
    for row, measure in enumerate(("l1", "l2", "dot", "cosine")):
        values = np.array(sims[measure][ref], dtype=float)
        others = np.delete(values, ref)
        expected = (values - others.min()) / (others.max() - others.min())
        expected[ref] = np.nan
        np.testing.assert_allclose(data[row], expected, rtol=1e-9)
    assert (tmp_path / "figures" / "f4.png").stat().st_size > 0


def test_pacs_sample_config_has_the_figure_instances():
    config = Config(load_config_file(REPO / "config" / "tfl_pacs_sample.yaml"))
    # metrics + timing of 4 methods x 4 held-out domains x 3 seeds
    assert len(config.reports["tfl_pacs_sample_fig2"].inputs) == 2 * 4 * 4 * 3
    fig4 = config.reports["tfl_pacs_sample_fig4"]
    assert fig4.spec["reference"] == 9
    assert re.search(r"held_out_15_16_17_18_19/none/tfl_f2/", fig4.inputs[0])
    raw = load_config_file(REPO / "config" / "tfl_pacs_sample.yaml")
    raw["reports"]["tfl_pacs_sample_fig4"]["method"] = "fedavg"
    with pytest.raises(BenchlibError, match="method fedavg is not TFL"):
        Config(raw)
    raw = eicu_config(Path("stays.csv"))
    raw["datasets"]["eicu"]["training"].pop("round_metrics")
    with pytest.raises(BenchlibError, match=r"no per-round roc_auc; add it to datasets\.eicu"):
        Config(raw)


def test_default_config_has_table6_and_the_figures():
    from benchlib.grid.paper_configs import load_paper_config

    config = Config(load_paper_config())
    assert len(config.reports["tfl_table6"].inputs) == 3 * 3 * 2  # methods x seeds x 2 files
    assert len(config.reports["tfl_fig2"].inputs) == 5 * 4 * 3 * 2
    fig8 = config.reports["tfl_fig8"]
    assert fig8.spec["panels"] == [f"{r} held out" for r in ("MIDWEST", "NORTHEAST", "SOUTH",
                                                               "WEST")]  # fmt: skip
    held = {run["experiment"] for run in fig8.spec["runs"]}
    sizes = {len(config.datasets[config.experiments[e]["dataset"]]["held_out"]) for e in held}
    assert sizes == {28, 4, 26, 14}
    assert config.datasets["tfl_eicu"]["training"]["round_metrics"] == ["roc_auc"]
    assert config.reports["tfl_fig4"].spec["reference"] == 9
