"""FedAgain's reports and paper targets: the report statistics by hand on generated collected
results, the tables, and the default config's FedAgain targets (resolving offline; kidney-stone
targets stop in their prepare job with one error naming params.path)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from conftest import REPO, tool_env

from benchlib.configuration.config import load_config
from benchlib.report.base import get_kind
from benchlib.report.kinds.fedagain.fedagain_fig13 import pooled_metric, summary_frame
from benchlib.report.kinds.fedagain.groups import group_values


def rows(experiment, method, seed, clients):
    """Collected rows: clients = [(accuracy, f1, n_test), ...]."""
    return [
        {"experiment": experiment, "method_id": method, "seed": seed, "client": i,
         "test_accuracy": acc, "test_f1_macro": f1, "n_test": n}
        for i, (acc, f1, n) in enumerate(clients)
    ]  # fmt: skip


def test_pooled_accuracy_is_correct_over_test_samples():
    frame = pd.DataFrame(rows("e", "fedagain", 0, [(0.5, 0.4, 10), (1.0, 0.9, 30)]))
    # (0.5 * 10 + 1.0 * 30) / 40 = 35 / 40
    assert pooled_metric(frame)["value"].tolist() == [35 / 40]
    assert pooled_metric(frame, "f1_macro")["value"].tolist() == pytest.approx([(4 + 27) / 40])


def test_demo_config_fig13_spec_and_summary_by_hand():
    config = load_config(REPO / "config" / "fedagain_demo.yaml")
    report = config.reports["fedagain_demo_fig13"]
    assert report.kind == "fedagain_fig13"
    assert "results/collected/demo_corruption__corruption_heavy/none.csv" in report.inputs
    spec = report.spec
    assert [label for _, label in spec["panels"][0]["corruption"]] == [
        "Light (10%, s3)", "Moderate (30%, s4)", "Heavy (40%, s5)"
    ]  # fmt: skip
    assert [label for _, label in spec["panels"][0]["clients"]] == ["5", "10", "20"]
    assert "mean +- std over seeds" in spec["statistic"]
    collected = pd.DataFrame(
        rows("demo_corruption__corruption_light", "fedagain", 0, [(0.8, 0, 10), (0.6, 0, 10)])
        + rows("demo_corruption__corruption_light", "fedagain", 1, [(0.9, 0, 10), (0.9, 0, 10)])
        + rows("demo_clients__clients_5", "fedavg", 0, [(0.5, 0, 4)])
    )
    frame = summary_frame(spec, collected)
    light = frame[(frame["row"] == "corruption") & (frame["method"] == "FedAgain")].iloc[0]
    # seeds: 0.7 and 0.9 -> mean 80 %, population std 10 points
    assert light["mean"] == pytest.approx(80.0) and light["std"] == pytest.approx(10.0)
    assert light["label"] == "Light (10%, s3)" and light["seeds"] == 2
    scale = frame[frame["row"] == "clients"]
    assert scale["mean"].tolist() == [50.0] and scale["label"].tolist() == ["5"]


def test_bars_statistic_over_a_groups_experiments():
    spec = {"methods": [["fedavg", "FedAvg"]], "metrics": ["accuracy"],
            "groups": [{"label": "Light", "experiments": ["a", "b"]}]}  # fmt: skip
    collected = pd.DataFrame(
        rows("a", "fedavg", 0, [(0.6, 0, 1)]) + rows("b", "fedavg", 0, [(0.8, 0, 3)])
        + rows("c", "fedavg", 0, [(0.1, 0, 1)])  # not in the group
    )  # fmt: skip
    values = group_values(spec, collected)
    assert sorted(values["value"].round(6).tolist()) == [60.0, 80.0]
    assert set(values["group"]) == {"Light"} and set(values["metric"]) == {"Accuracy"}


def test_tables_from_stores_and_the_corruption_list(tmp_path):
    kind = get_kind("fedagain_table")
    manifests = []
    stores = [("c", ["Ia", "IIa", "HAP"], {"train": 8, "test": 2}),
              ("b", ["Ia", "IIa", "IVd"], {"train": 4, "test": 1})]  # fmt: skip
    for name, classes, patches in stores:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"classes": classes, "num_classes": 3, "patches": patches,
                                    "view": "MIX"}))  # fmt: skip
        manifests.append(path)
    spec = {"table": "subtypes", "datasets": [["c", "MyStone"], ["b", "El-Beze"]],
            "caption": "t1", "statistic": "s"}  # fmt: skip
    kind.render(spec, manifests, [tmp_path / "t1.tex"])
    text = (tmp_path / "t1.tex").read_text()
    assert r"HAP & Yes & No & No \\" in text and r"Ia & Yes & Yes & Yes \\" in text
    assert r"IVd & No & Yes & No \\" in text
    kind.render({**spec, "table": "subsets"}, manifests, [tmp_path / "t2.tex"])
    assert r"MyStone & MIX & 3 & 8 & 2 & 10 \\" in (tmp_path / "t2.tex").read_text()
    kind.render({**spec, "table": "corruptions", "datasets": []}, [], [tmp_path / "t3.tex"])
    table3 = (tmp_path / "t3.tex").read_text()
    assert table3.count(r"\\") - 1 == 19 and r"Blur & glass blur \\" in table3


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(workdir), *args],
        capture_output=True, text=True, env=tool_env(), timeout=600,
    )  # fmt: skip


@pytest.mark.workflow
@pytest.mark.slow
def test_fedagain_paper_targets_resolve_offline(tmp_path):
    targets = ["figures/fedagain_fig13.pdf", "figures/fedagain_fig8.pdf",
               "tables/fedagain_table3.tex"]  # fmt: skip
    result = snakemake(tmp_path, "-n", *targets)
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "results/downloads/cifar10/cifar-10-python.tar.gz" in out
    assert "results/corrupted/mnist__clients_20/" in out  # .../<settings key>/manifest.json
    assert "results/data/kidney_a_mix/manifest.json" in out
    assert "rule fetch_weights" in out and "results/weights/resnet18-f37072fd.pth" in out


@pytest.mark.workflow
@pytest.mark.slow
def test_kidney_target_without_data_fails_in_prepare_naming_the_key(tmp_path):
    result = snakemake(tmp_path, "--cores", "1", "tables/fedagain_table1.tex")
    assert result.returncode != 0
    logs = sorted((tmp_path / "logs" / "prepare_data").glob("kidney_*.log"))
    assert logs
    errors = [line for line in logs[0].read_text().splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "params.path" in errors[0] and "<view>/<train|test>" in errors[0]
    assert not (tmp_path / "tables" / "fedagain_table1.tex").exists()
    assert not list((tmp_path / "results" / "data").glob("kidney_*/manifest.json"))


def test_trust_weights_of_corrupted_and_clean_clients():
    from benchlib.report.kinds.fedagain.fedagain_trust import trust_by_group

    metrics = {"method_summary": {"trust": [
        {"round": 0, "clients": [0, 1, 2], "w": [0.1, 0.3, 0.6], "E": [2.0, 1.0, 1.0],
         "D": [3.0, 1.0, None]},
    ]}}  # fmt: skip
    (row,) = trust_by_group(metrics, corrupted=[0])
    assert row["w_corrupted"] == pytest.approx(0.1) and row["w_clean"] == pytest.approx(0.45)
    assert row["E_corrupted"] == 2.0 and row["D_clean"] == 1.0  # None left out
    config = load_config(REPO / "config" / "fedagain_demo.yaml")
    spec = config.reports["fedagain_demo_trust"].spec
    assert [p["corrupted"] for p in spec["panels"]] == [[0], [0, 4, 5], [0, 4, 5, 6]]


def test_figure_kinds_render_pdf_and_png(tmp_path):
    frames = []
    for e, acc in (
        ("x__corruption_light", 0.7),
        ("x__corruption_heavy", 0.5),
        ("y__clients_5", 0.8),
    ):
        for method, delta in (("fedagain", 0.05), ("fedavg", 0.0)):
            frames += rows(e, method, 0, [(acc + delta, acc, 10), (acc, acc, 10)])
    csv = tmp_path / "collected.csv"
    pd.DataFrame(frames).assign(test_recall_macro=0.5, test_precision_macro=0.6).to_csv(csv)
    methods = [["fedagain", "FedAgain"], ["fedavg", "FedAvg"]]
    fig13 = {"panels": [{"title": "P", "corruption": [["x__corruption_light", "Light"],
             ["x__corruption_heavy", "Heavy"]], "clients": [["y__clients_5", "5"]]}],
             "rows": ["corruption", "clients"], "methods": methods, "metric": "accuracy",
             "title": "t", "note": "n", "statistic": "s"}  # fmt: skip
    bars = {"groups": [{"label": "Light", "experiments": ["x__corruption_light"]},
                       {"label": "Heavy", "experiments": ["x__corruption_heavy"]}],
            "methods": methods, "metrics": ["accuracy", "f1_macro"], "title": "t",
            "note": "", "statistic": "s"}  # fmt: skip
    for kind, spec in (("fedagain_fig13", fig13), ("fedagain_bars", bars), ("fedagain_box", bars)):
        out = [tmp_path / f"{kind}.pdf", tmp_path / f"{kind}.png"]
        get_kind(kind).render(spec, [csv], out)
        assert out[0].read_bytes()[:4] == b"%PDF" and out[1].read_bytes()[:4] == b"\x89PNG"


# ------------------------------------- macro scores of the pooled predictions (issue 24.4)
# Two clients, 4 classes. Client 0: four class-0 samples (3 predicted 0, 1 predicted 1) and one
# class-1 sample (predicted 1); client 1: two class-1 samples (both predicted 2) and three
# class-2 samples (predicted 2). Class 3 occurs nowhere.
COUNTS = [
    {"true": [4, 1, 0, 0], "predicted": [3, 2, 0, 0], "correct": [3, 1, 0, 0]},
    {"true": [0, 2, 3, 0], "predicted": [0, 0, 5, 0], "correct": [0, 0, 3, 0]},
]
# pooled: true (4, 3, 3), predicted (3, 2, 5), correct (3, 1, 3); class 3 (never true, never
# predicted) is left out of the macro mean, as torchmetrics and scikit-learn do
POOLED = {
    "precision_macro": (1 + 1 / 2 + 3 / 5) / 3,  # 0.7
    "recall_macro": (3 / 4 + 1 / 3 + 1) / 3,  # 25/36
    "balanced_accuracy": (3 / 4 + 1 / 3 + 1) / 3,
    "f1_macro": (6 / 7 + 2 / 5 + 6 / 8) / 3,  # 2 correct / (true + predicted): 281/420
}


def _logits(predicted: list[int], classes: int = 4):
    import torch

    return torch.nn.functional.one_hot(torch.tensor(predicted), classes).float()


def test_class_counts_of_a_classification_task_by_hand():
    import torch

    from benchlib.tasks import get_task

    task = get_task("classification")
    targets = [[0, 0, 0, 0, 1], [1, 1, 2, 2, 2]]
    predicted = [[0, 0, 0, 1, 1], [2, 2, 2, 2, 2]]
    for counts, y, p in zip(COUNTS, targets, predicted, strict=True):
        assert task.class_counts(_logits(p), torch.tensor(y)) == counts
    # a non-finite score is a wrong prediction, as in the task's metrics
    broken = _logits([0, 1])
    broken[0, 0] = float("nan")
    assert task.class_counts(broken, torch.tensor([0, 1]))["correct"] == [0, 1, 0, 0]
    assert get_task("regression").class_counts(torch.zeros(2, 1), torch.zeros(2)) is None
    # one client's counts give the task's own (torchmetrics) macro scores
    from benchlib.report.kinds.fedagain.fedagain_fig13 import macro_scores

    for counts, y, p in zip(COUNTS, targets, predicted, strict=True):
        ours = task.metrics(_logits(p), torch.tensor(y))
        for name, value in macro_scores([counts]).items():
            assert value == pytest.approx(ours[name], rel=1e-6), name


def test_pooled_macro_scores_by_hand_from_collected_class_counts(tmp_path):
    from benchlib.report.collect import collect

    path = tmp_path / "metrics.json"
    cell = {"experiment": "e", "dataset": "d", "malfunction": "none", "method_id": "fedagain",
            "method": "fedagain", "k": 0, "seed": 0}  # fmt: skip
    clients = [
        {"client": 0, "malicious": False, "test_accuracy": 0.8, "test_precision_macro": 0.75,
         "test_recall_macro": 0.875, "test_balanced_accuracy": 0.875, "test_f1_macro": 0.7619,
         "n_train": 9, "n_val": 1,
         "n_test": 5},
        {"client": 1, "malicious": False, "test_accuracy": 0.6, "test_precision_macro": 0.3,
         "test_recall_macro": 0.5, "test_balanced_accuracy": 0.5, "test_f1_macro": 0.375,
         "n_train": 9, "n_val": 1,
         "n_test": 5},
    ]  # fmt: skip
    metrics = {"cell": cell, "clients": clients, "class_counts": {"0": COUNTS[0], "1": COUNTS[1]}}
    path.write_text(json.dumps(metrics))
    frame = collect([path])
    for metric, expected in POOLED.items():
        (value,) = pooled_metric(frame, metric)["value"].tolist()
        assert value == pytest.approx(expected, rel=1e-12), metric
    assert pooled_metric(frame, "f1_macro")["statistic"].tolist() == ["pooled"]
    # accuracy stays the exact pooled ratio: (0.8 * 5 + 0.6 * 5) / 10
    assert pooled_metric(frame)["value"].tolist() == pytest.approx([0.7])
    # without recorded counts (older runs): the size-weighted client mean, and it says so
    older = frame.drop(columns=["class_counts"])
    weighted = pooled_metric(older, "precision_macro")
    assert weighted["value"].tolist() == pytest.approx([(0.75 * 5 + 0.3 * 5) / 10])
    assert weighted["statistic"].tolist() == ["weighted"]
    # metrics.json without the key collects exactly as before (no class_counts column)
    path.write_text(json.dumps({"cell": cell, "clients": clients}))
    assert "class_counts" not in collect([path]).columns


def test_bars_note_cells_whose_macro_scores_are_client_means(tmp_path):
    spec = {"methods": [["fedavg", "FedAvg"]], "metrics": ["accuracy", "f1_macro"],
            "groups": [{"label": "Light", "experiments": ["a"]}]}  # fmt: skip
    collected = pd.DataFrame(rows("a", "fedavg", 0, [(0.6, 0.5, 2), (0.8, 0.7, 2)]))
    values = group_values(spec, collected)
    f1 = values[values["metric"] == "F1 score"]
    assert f1["value"].tolist() == pytest.approx([60.0])
    assert f1["statistic"].tolist() == ["weighted"]
    assert set(values[values["metric"] == "Accuracy"]["statistic"]) == {"pooled"}
    from benchlib.report.kinds.fedagain.fedagain_fig13 import with_weighted_note

    noted = with_weighted_note({**spec, "statistic": "s"}, values)["statistic"]
    assert noted.startswith("s; macro scores of 1 cell(s) that recorded no class counts")
    accuracy_only = values[values["metric"] == "Accuracy"]
    assert with_weighted_note({**spec, "statistic": "s"}, accuracy_only)["statistic"] == "s"


@pytest.mark.workflow
@pytest.mark.slow
def test_changed_corruption_settings_build_a_new_store(tmp_path):
    """A corrupted store's path names its resolved settings: another setting builds another
    store (the old one is neither reused nor overwritten); the same settings spelled out with
    their defaults reuse it."""
    import yaml

    from benchlib.data.corruptions import cell_store

    base = yaml.safe_load((REPO / "config" / "fedagain_demo.yaml").read_text())
    base["reports"] = {}
    base["experiments"] = {"e": {**base["experiments"]["demo_corruption"], "axes": {}}}

    def configure(name, corruption):
        config = json.loads(json.dumps(base))
        config["datasets"]["mnist5k_ls"]["corruption"] = corruption
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        return str(path), cell_store(load_config(path), "mnist5k_ls") + "/manifest.json"

    first, store = configure("a", {"ratio": 0.1, "severity": 3})
    same, same_store = configure("b", {"ratio": 0.1, "severity": 3, "subsets": ["train", "val"]})
    other, other_store = configure("c", {"ratio": 0.1, "severity": 3, "subsets": ["train"]})
    assert same_store == store and other_store != store
    done = snakemake(tmp_path, "--configfile", first, "--cores", "1", store)
    assert done.returncode == 0, done.stderr[-2000:]
    built = (tmp_path / store).stat().st_mtime_ns
    assert json.loads((tmp_path / store).read_text())["corruption"]["subsets"] == ["train", "val"]
    again = snakemake(tmp_path, "--configfile", same, "-n", same_store)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    done = snakemake(tmp_path, "--configfile", other, "--cores", "1", other_store)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rule corrupt_store" in done.stdout + done.stderr
    assert json.loads((tmp_path / other_store).read_text())["corruption"]["subsets"] == ["train"]
    assert (tmp_path / store).stat().st_mtime_ns == built  # the first store is untouched


def test_paper_config_resnet18_is_imagenet_pretrained_with_imagenet_statistics():
    """Paper Sec. 4.2.5: ImageNet statistics "ensuring feature-scale consistency with pretrained
    models" (docs/papers/fedagain.md): every FedAgain dataset's ResNet18 loads ImageNet
    weights (fetch_weights rule) and its inputs get ImageNet's normalisation."""
    import yaml

    config = yaml.safe_load((REPO / "config" / "paper" / "fedagain.yaml").read_text())
    assert len(config["datasets"]) == 16
    for name, dataset in config["datasets"].items():
        assert dataset["model"] == {"name": "resnet18", "params": {"pretrained": True}}, name
        assert dataset["transforms"]["normalize"] == {
            "mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]
        }, name  # fmt: skip
        assert dataset["training"]["lr"] == 0.01  # Sec. 5.1.1, not Algorithm 2's 0.001
