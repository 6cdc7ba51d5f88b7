"""TFL Table 6 and Figures 1, 2, 4, 7, 8: the recording they need (per-round test metrics, TFL's
final model similarities) and their report kinds on hand-made metrics.json / timing.json files.
The data drawn in each figure is read back and compared with numbers computed here by hand (no
golden images)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers.builders import build_method

from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import get_kind
from benchlib.report.kinds.tfl.tfl_similarity_figure import scale_row


# ------------------------------------------------------------------ recording in the run
def test_tfl_records_final_similarities_under_every_measure():
    method = build_method("tfl", dict(update_every=10))
    method.setup(4, 5, seed=0)
    method._start([0, 1, 2])
    method._counts = {0: 1, 2: 1}
    received = torch.tensor([[1.0, 0.0], [3.0, 4.0]])
    method.memory = None
    method._remember(received, [0, 2])  # client 1 never trained: left out
    sims = method.summary()["similarities"]
    assert sims["clients"] == [0, 2]
    assert sims["dot"] == [[1.0, 3.0], [3.0, 25.0]]
    assert sims["cosine"][0][1] == pytest.approx(0.6)  # 3 / (1 * 5)
    assert sims["l2"][0][1] == pytest.approx(-math.sqrt(4 + 16))
    assert sims["l1"][0][1] == pytest.approx(-6.0)
    assert sims["l1"][0][0] == 0.0
    fresh = build_method("tfl", {})
    fresh.setup(3, 5, seed=0)
    assert fresh.summary()["similarities"] == {}  # nothing transmitted yet


def test_round_metrics_are_recorded_per_round_and_match_the_final_scores(tmp_path):
    from helpers.task_stores import groups_split, regression_store, task_cell_spec

    from benchlib.fl.engine import run_cell

    store = regression_store(tmp_path / "store", n=120, groups=5)
    split = groups_split(store, tmp_path / "split.csv", clients=5)
    spec = task_cell_spec("regression", "fedavg", clients=5, held_out=[4])
    spec["training"]["rounds"] = 3
    plain = run_cell(spec, store, split, tmp_path / "plain.json", tmp_path / "ck0")
    assert "round_metrics" not in plain["history"]  # nothing recorded unless asked for
    spec["training"]["round_metrics"] = ["mae"]
    metrics = run_cell(spec, store, split, tmp_path / "a.json", tmp_path / "ck")
    rounds = metrics["history"]["round_metrics"]
    assert len(rounds) == 3
    assert [len(r["clients"]) for r in rounds] == [4, 4, 4]
    assert [len(r["held_out_clients"]) for r in rounds] == [1, 1, 1]
    # after the last round the models are the final ones: the same test scores
    assert [c["mae"] for c in rounds[-1]["clients"]] == [c["test_mae"] for c in metrics["clients"]]
    assert rounds[-1]["held_out_clients"][0]["mae"] == metrics["held_out_clients"][0]["test_mae"]
    assert rounds[0]["clients"] != rounds[-1]["clients"]  # the model changed between rounds
    spec["training"]["round_metrics"] = ["roc_auc"]
    with pytest.raises(BenchlibError, match=r"round_metrics names .*roc_auc.*mse, mae"):
        run_cell(spec, store, split, tmp_path / "b.json", tmp_path / "ck_b")


# ------------------------------------------------------------------ hand-made run files
def write_run(
    root: Path,
    name: str,
    clients: list[float],
    held: list[float],
    rounds: list[tuple[list, list]] | None = None,
    seconds: list[float] | None = None,
    resumed: int = 0,
    metric: str = "roc_auc",
    summary: dict | None = None,
    pooled: dict | None = None,
) -> dict:
    """metrics.json (+ timing.json) of one cell; returns its run entry."""
    folder = root / name
    folder.mkdir(parents=True)
    history = {"val_accuracy": [[0.5] * len(clients)] * len(rounds or [None] * 3)}
    if rounds is not None:
        history["round_metrics"] = [
            {
                "clients": [{metric: v} for v in c],
                "held_out_clients": [{metric: v} for v in h],
            }
            for c, h in rounds
        ]
    metrics = {
        "primary_metric": "accuracy",
        "history": history,
        "clients": [{"client": i, f"test_{metric}": v} for i, v in enumerate(clients)],
        "held_out_clients": [{"client": 10 + i, f"test_{metric}": v} for i, v in enumerate(held)],
        "method_summary": summary or {},
        **({"pooled": pooled} if pooled is not None else {}),
    }
    (folder / "metrics.json").write_text(json.dumps(metrics))
    timing = {"round_seconds": seconds or [1.0, 1.0, 1.0], "resumed_from_round": resumed}
    (folder / "timing.json").write_text(json.dumps(timing))
    return {"path": str(folder / "metrics.json"), "timing": str(folder / "timing.json")}


def paths(runs: list[dict], timing: bool = True) -> list[Path]:
    keys = ("path", "timing") if timing else ("path",)
    return [Path(run[k]) for run in runs for k in keys]


def test_cost_table_values_by_hand(tmp_path):
    """Table 6 scores the pooled predictions, as Table 10 and the report score the same eICU
    cells (before: the mean of per-client ROC-AUCs, dropping hospitals with a null one: here
    fedavg's seed 1 would read 0.7 from its one defined hospital, the pooled 0.674 instead)."""
    runs = [
        {**write_run(tmp_path, "a0", [0.9], [0.5, 0.7], seconds=[1.0, 2.0, 3.0],
                     pooled={"oof": {"roc_auc": 0.62}, "if": {"roc_auc": 0.9}}),
         "method": "fedavg", "experiment": "e", "seed": 0},
        {**write_run(tmp_path, "a1", [0.9], [None, 0.7], seconds=[2.0, 2.0, 2.0],
                     pooled={"oof": {"roc_auc": 0.674}, "if": {"roc_auc": 0.9}}),
         "method": "fedavg", "experiment": "e", "seed": 1},
        # resumed at round 1: 2 rounds of 4 s measured -> 3 rounds estimated at 12 s
        {**write_run(tmp_path, "t0", [0.9], [0.8, 0.8], seconds=[4.0, 4.0], resumed=1,
                     pooled={"oof": {"roc_auc": 0.8}, "if": {"roc_auc": 0.9}}),
         "method": "tfl", "experiment": "e", "seed": 0},
    ]  # fmt: skip
    spec = {
        "name": "t6", "metric": "roc_auc", "metric_label": "ROC-AUC", "percent": True,
        "decimals": 2, "scope": "oof", "methods": [["fedavg", "FedAvg"], ["tfl", "TFL"]],
        "runs": runs, "title": "T6", "caption_note": "", "pooling": "pooled",
        "quoted": {"tfl": {"value": 58.41, "std": 0.06, "seconds": 437.61}},
    }  # fmt: skip
    kind = get_kind("tfl_cost_table")
    values = kind.values(spec, paths(runs))
    assert values["fedavg"]["value"] == pytest.approx([0.62, 0.674])
    assert values["fedavg"]["seconds"] == [6.0, 6.0]
    assert values["tfl"]["seconds"] == [12.0] and values["tfl"]["per_round"] == [4.0]
    out = tmp_path / "t6.tex"
    kind.render(spec, paths(runs), [out])
    text = out.read_text()
    # pooled OOF 62.0 and 67.4 -> 64.70 +- 2.70; seconds 6, 6 -> 6.00 +- 0.00; 2.000 s per round
    assert r"FedAvg & 64.70 $\pm$ 2.70 & 6.00 $\pm$ 0.00 & 2.000 $\pm$ 0.000 \\" in text
    assert r"TFL & 80.00 & 12.00 & 4.000 \\" in text
    assert r"TFL & 58.41 $\pm$ 0.06 & 437.61 & -- \\" in text and "paper (quoted)" in text
    assert "1 resumed cell(s)" in text
    # the client mean stays available: seed 1's hospital without a ROC-AUC is left out
    clients = kind.values({**spec, "pooling": "clients"}, paths(runs))
    assert clients["fedavg"]["value"] == pytest.approx([0.6, 0.7])


def test_cost_table_needs_timing(tmp_path):
    run = {**write_run(tmp_path, "a", [0.9], [0.5]), "method": "fedavg", "seed": 0}
    Path(run["timing"]).write_text(json.dumps({"resumed_from_round": 0}))
    spec = {"name": "t", "metric": "roc_auc", "scope": "oof", "methods": [["fedavg", "F"]],
            "runs": [run], "title": "t", "caption_note": "", "pooling": "pooled",
            "quoted": {}}  # fmt: skip
    with pytest.raises(BenchlibError, match="no round_seconds"):
        get_kind("tfl_cost_table").values(spec, paths([run]))


def test_if_oof_figure_draws_the_seed_means(tmp_path):
    runs = [
        {**write_run(tmp_path, "p0", [0.8, 0.6], [0.5]), "panel": "W", "method": "fedavg"},
        {**write_run(tmp_path, "p1", [0.9, 0.9], [0.6]), "panel": "W", "method": "fedavg"},
        {**write_run(tmp_path, "q0", [1.0, 0.8], [0.4]), "panel": "S", "method": "fedavg"},
        {**write_run(tmp_path, "q1", [0.7, 0.7], [0.2]), "panel": "S", "method": "fedavg"},
    ]
    spec = {"name": "f", "metric": "roc_auc", "metric_label": "ROC-AUC", "percent": True,
            "decimals": 1, "panels": ["W", "S"], "methods": [["fedavg", "FedAvg"]],
            "runs": runs, "title": "F"}  # fmt: skip
    from matplotlib.container import BarContainer

    figure = get_kind("tfl_if_oof_figure").draw(spec, paths(runs, timing=False))
    bar_sets = {
        (ax.get_title(), bars.get_label()): bars
        for ax in figure.axes
        for bars in ax.containers
        if isinstance(bars, BarContainer)
    }
    heights = {key: [p.get_height() for p in bars.patches] for key, bars in bar_sets.items()}
    # W: IF client means 0.7 and 0.9 -> 80; OOF 0.5, 0.6 -> 55. S: IF 0.9, 0.7 -> 80; OOF 30
    assert heights[("W", "IF")] == pytest.approx([80.0])
    assert heights[("W", "OOF")] == pytest.approx([55.0])
    assert heights[("S", "IF")] == pytest.approx([80.0])
    assert heights[("S", "OOF")] == pytest.approx([30.0])
    # error bars: std over seeds, OOF of W = 5
    caps = bar_sets[("W", "OOF")].errorbar.lines[2][0].get_segments()[0]
    assert caps[1][1] - caps[0][1] == pytest.approx(10.0)


def test_round_figure_draws_the_per_round_client_and_seed_means(tmp_path):
    runs = [
        {**write_run(tmp_path, "a0", [0.9], [0.5], rounds=[([0.9], [0.5, 0.7]),
                                                            ([0.9], [0.6, None])]),
         "method": "fedavg"},
        {**write_run(tmp_path, "a1", [0.9], [0.5], rounds=[([0.9], [0.4, 0.4]),
                                                            ([0.9], [0.8, 0.8])]),
         "method": "fedavg"},
    ]  # fmt: skip
    spec = {"name": "f7", "metric": "roc_auc", "metric_label": "ROC-AUC", "percent": True,
            "decimals": 1, "scope": "oof", "methods": [["fedavg", "FedAvg"]], "runs": runs,
            "title": "F7"}  # fmt: skip
    kind = get_kind("tfl_round_figure")
    (line,) = kind.draw(spec, paths(runs, timing=False)).axes[0].get_lines()
    # round 1: seed means 0.6, 0.4 -> 50; round 2: 0.6 (None skipped), 0.8 -> 70
    assert line.get_label() == "FedAvg"
    np.testing.assert_allclose(line.get_xdata(), [1, 2])
    np.testing.assert_allclose(line.get_ydata(), [50.0, 70.0])
    spec["scope"] = "if"
    (line,) = kind.draw(spec, paths(runs, timing=False)).axes[0].get_lines()
    np.testing.assert_allclose(line.get_ydata(), [90.0, 90.0])
    bare = write_run(tmp_path, "b", [0.9], [0.5])
    with pytest.raises(BenchlibError, match=r"round_metrics: \[roc_auc\]"):
        kind.draw({**spec, "runs": [{**bare, "method": "fedavg"}]}, [Path(bare["path"])])


def test_time_figure_places_each_method_by_hand(tmp_path):
    runs = [  # two held-out domains, TFL: one seed each; FedAvg: two seeds on domain A
        {**write_run(tmp_path, "fa0", [0.9], [0.4], seconds=[1.0, 1.0, 1.0]),
         "method": "fedavg", "experiment": "A"},
        {**write_run(tmp_path, "fa1", [0.9], [0.6], seconds=[2.0, 2.0, 2.0]),
         "method": "fedavg", "experiment": "A"},
        {**write_run(tmp_path, "fc0", [0.9], [0.8], seconds=[3.0, 3.0, 3.0]),
         "method": "fedavg", "experiment": "C"},
        {**write_run(tmp_path, "ta", [0.9], [0.7], seconds=[5.0, 5.0, 5.0]),
         "method": "tfl", "experiment": "A"},
        {**write_run(tmp_path, "tc", [0.9], [0.9], seconds=[7.0, 7.0, 7.0]),
         "method": "tfl", "experiment": "C"},
    ]  # fmt: skip
    spec = {"name": "f2", "metric": "roc_auc", "metric_label": "ROC-AUC", "percent": True,
            "decimals": 1, "scope": "oof", "runs": runs, "title": "F2",
            "methods": [["fedavg", "FedAvg"], ["tfl", "TFL"]]}  # fmt: skip
    figure = get_kind("tfl_time_figure").draw(spec, paths(runs))
    offsets = {c.get_label(): c.get_offsets()[0].tolist() for c in figure.axes[0].collections}
    # FedAvg: domain A seeds 0.4, 0.6 -> 0.5, C 0.8 -> (0.5 + 0.8) / 2 = 65 %; time (3+6+9)/3 = 6
    assert offsets["FedAvg"] == pytest.approx([6.0, 65.0])
    assert offsets["TFL"] == pytest.approx([18.0, 80.0])  # (15 + 21) / 2, (70 + 90) / 2


def test_similarity_figure_scales_the_reference_row(tmp_path):
    dot = [[1.0, 2.0, 4.0], [2.0, 5.0, 3.0], [4.0, 3.0, 9.0]]
    sims = {"clients": [0, 1, 2], "dot": dot, "cosine": dot, "l1": [[0, -1, -3], [-1, 0, -2],
            [-3, -2, 0]], "l2": dot}  # fmt: skip
    run = write_run(tmp_path, "t", [0.9], [0.5], summary={"similarities": sims})
    spec = {"name": "f4", "runs": [run], "reference": 1, "measures": ["l1", "dot"],
            "title": "F4"}  # fmt: skip
    kind = get_kind("tfl_similarity_figure")
    image = kind.draw(spec, [Path(run["path"])]).axes[0].get_images()[0]
    data = np.ma.filled(image.get_array(), np.nan)
    # client 1's row: l1 -1, (self), -2 -> 1, nan, 0; dot 2, (self), 3 -> 0, nan, 1
    np.testing.assert_allclose(data, [[1.0, np.nan, 0.0], [0.0, np.nan, 1.0]])
    full = kind.draw({**spec, "reference": None}, [Path(run["path"])])
    dot_panel = np.ma.filled(full.axes[1].get_images()[0].get_array(), np.nan)
    # off-diagonal dot 2, 4, 3 -> scaled (v - 2) / 2
    np.testing.assert_allclose(dot_panel, [[np.nan, 0, 1], [0, np.nan, 0.5], [1, 0.5, np.nan]])
    np.testing.assert_allclose(scale_row(np.array([5.0, 5.0, 1.0]), 2), [1.0, 1.0, np.nan])
    with pytest.raises(BenchlibError, match="not among the recorded clients"):
        kind.draw({**spec, "reference": 7}, [Path(run["path"])])
    empty = write_run(tmp_path, "e", [0.9], [0.5])
    with pytest.raises(BenchlibError, match="records no model similarities"):
        kind.draw(spec, [Path(empty["path"])])


def test_undefined_client_values_are_left_out_of_a_cell_mean():
    from benchlib.report.kinds.tfl.runs import cell_value

    metrics = {"held_out_clients": [{"test_roc_auc": 0.5}, {"test_roc_auc": None},
                                    {"test_roc_auc": 0.8}]}  # fmt: skip
    assert cell_value(metrics, "oof", "test_roc_auc", "m") == pytest.approx(0.65)
    metrics["held_out_clients"] = [{"test_roc_auc": None}]
    with pytest.raises(BenchlibError, match="undefined or not finite for every client"):
        cell_value(metrics, "oof", "test_roc_auc", "m")
    with pytest.raises(BenchlibError, match="test_accuracy is missing"):
        cell_value(metrics, "oof", "test_accuracy", "m")


def test_current_flow_centrality_by_hand():
    from benchlib.methods.client_graph import centrality

    # a 4-cycle: for node 2, pair (0, 3) sends 1/2 of its current through it, the adjacent pairs
    # (0, 1) and (1, 3) 1/4 each (the long way round has resistance 3 against 1): 1 in all,
    # unnormalised as the paper's betweenness (issue 24 item 13); normalised by
    # 2 / ((n - 1)(n - 2)) = 1/3. Shortest paths give only 1/2 -> 1/6.
    cycle = np.array([[0, 1, 1, 0], [1, 0, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]])
    np.testing.assert_allclose(centrality(cycle, "current_flow"), [1.0] * 4)
    flow = centrality(cycle, "current_flow", normalized_betweenness=True)
    np.testing.assert_allclose(flow, [1 / 3] * 4)
    normalised = centrality(cycle, "betweenness", normalized_betweenness=True)
    np.testing.assert_allclose(normalised, [1 / 6] * 4)
    # the paper's unnormalised betweenness (the TFL default): pairs (0, 3) and (1, 2) split
    # their two shortest paths, 1/2 through each of the other nodes
    np.testing.assert_allclose(centrality(cycle, "betweenness"), [1 / 2] * 4)
    # disconnected: the path 0-1-2 and an isolated node 3 (per component, the whole graph's n)
    path = np.zeros((4, 4), dtype=int)
    path[0, 1] = path[1, 0] = path[1, 2] = path[2, 1] = 1
    np.testing.assert_allclose(centrality(path, "current_flow"), [0, 1, 0, 0])
    normalised = centrality(path, "current_flow", normalized_betweenness=True)
    np.testing.assert_allclose(normalised, [0, 1 / 3, 0, 0])
    # a star of 4: each of the 3 leaf pairs sends its whole current through the centre
    star = np.zeros((4, 4), dtype=int)
    star[0, 1:] = star[1:, 0] = 1
    np.testing.assert_allclose(centrality(star, "current_flow"), [3, 0, 0, 0])
    np.testing.assert_allclose(centrality(np.zeros((2, 2), dtype=int), "current_flow"), [0, 0])
    assert build_method("tfl", dict(centrality="current_flow")).centrality == "current_flow"


def test_time_figure_refuses_a_cell_without_rounds(tmp_path):
    run = {**write_run(tmp_path, "a", [0.9], [0.5]), "method": "fedavg", "experiment": "A"}
    metrics = json.loads(Path(run["path"]).read_text())
    metrics["history"] = {}
    Path(run["path"]).write_text(json.dumps(metrics))
    spec = {"name": "f2", "metric": "roc_auc", "metric_label": "ROC-AUC", "percent": True,
            "decimals": 1, "scope": "oof", "runs": [run], "title": "F2",
            "methods": [["fedavg", "FedAvg"]]}  # fmt: skip
    with pytest.raises(BenchlibError, match="records no rounds"):
        get_kind("tfl_time_figure").draw(spec, paths([run]))


def test_topology_figure_names_a_missing_metrics_file(tmp_path):
    missing = tmp_path / "absent" / "metrics.json"
    spec = {"name": "f", "metrics": str(missing), "update": -1, "title": "t",
            "node_groups": {"x": [0, 1]}}  # fmt: skip
    with pytest.raises(BenchlibError, match="not found; run its cell first"):
        outs = [tmp_path / "f.pdf", tmp_path / "f.png"]
        get_kind("tfl_topology_figure").render(spec, [missing], outs)
