"""``erm``, the centralised reference of TFL Tables 2 and 3: one model trained on the pooled
training rows of the federation clients.

Hand-checked: with a linear model, SGD and one batch holding every row, a round of E epochs is E
full-batch gradient steps on the pooled data (computed here in NumPy); held-out rows never move
the model; two runs are identical; batched training never picks ERM up; a 2-round cell of the
real TPT-48 release writes IF and OOF entries.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch
import yaml
from conftest import REPO
from helpers.task_stores import groups_split, regression_store, task_cell_spec

from benchlib.configuration.config import Config
from benchlib.data.registry import get_dataset
from benchlib.data.sources import tpt48
from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store, write_store
from benchlib.fl.engine import CellRun, run_cell

LR = 0.1


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """90 rows, 3 features, 3 groups -> 3 clients (client 2 held out below)."""
    root = tmp_path_factory.mktemp("erm")
    store = regression_store(root / "store", n=90, features=3, groups=3)
    return store, groups_split(store, root / "split.csv", clients=3)


def linear_spec(method: str = "erm", epochs: int = 2, rounds: int = 1, **training) -> dict:
    """A linear model (mlp without hidden layers), plain SGD, one batch holding every row."""
    return task_cell_spec(
        "regression",
        method,
        clients=3,
        held_out=[2],
        model={"name": "mlp", "params": {"hidden": []}},
        training={
            "optimizer": "sgd",
            "lr": LR,
            "batch_size": 1000,
            "local_epochs": epochs,
            "rounds": rounds,
            "loss": "mse",
            **training,
        },
    )


def gradient_steps(w, b, x, y, steps):
    """``steps`` full-batch gradient steps on mean((x w + b - y)^2), in float64."""
    for _ in range(steps):
        residual = x @ w + b - y
        w = w - LR * 2 * x.T @ residual / len(y)
        b = b - LR * 2 * residual.mean()
    return w, b


def train_rows(cell: CellRun, clients: list[int]) -> np.ndarray:
    return np.concatenate([cell.clients[c].rows["train"] for c in clients])


def store_xy(store, rows):
    data = load_store(store)
    return data.inputs[rows].astype(np.float64), data.arrays["targets"][rows, 0].astype(np.float64)


def test_a_round_is_full_batch_gradient_descent_on_the_pooled_rows(data):
    store, split = data
    cell = CellRun(linear_spec(), store, split)
    assert cell.federation == [0, 1] and cell.batched is None
    start = cell.global_vector.double().numpy()
    w0, b0 = start[:3], start[3]  # Linear(3, 1): weight then bias
    cell.run_round(0)
    got = cell.global_vector.double().numpy()

    x, y = store_xy(store, train_rows(cell, [0, 1]))
    w, b = gradient_steps(w0, b0, x, y, steps=2)
    np.testing.assert_allclose(got, np.r_[w, b], rtol=1e-5, atol=1e-6)
    # the check can fail: with the held-out client's rows, or as FedAvg, the result differs
    x3, y3 = store_xy(store, train_rows(cell, [0, 1, 2]))
    assert not np.allclose(got, np.r_[gradient_steps(w0, b0, x3, y3, steps=2)], atol=1e-4)
    fedavg = CellRun(linear_spec("fedavg"), store, split)
    fedavg.run_round(0)
    assert not np.allclose(got, fedavg.global_vector.double().numpy(), atol=1e-4)
    # every client is scored with the one model, the held-out client too
    assert all(torch.equal(cell.scoring.evaluation_vector(c), cell.global_vector) for c in (0, 1))
    assert torch.equal(cell.scoring.held_out_vector(), cell.global_vector)


def test_held_out_rows_never_train(data, tmp_path):
    """Changing the held-out client's training targets leaves ERM's model unchanged."""
    store, split = data
    loaded = load_store(store)
    targets = np.array(loaded.arrays["targets"])
    held_rows = CellRun(linear_spec(), store, split).clients[2].rows["train"]
    targets[held_rows] *= 100.0
    changed = tmp_path / "store"
    write_store(
        changed, dataset="linear", index=loaded.index, features=np.array(loaded.inputs),
        targets=targets, num_classes=1, sources=[], task="regression",
    )  # fmt: skip
    spec = linear_spec(epochs=1, rounds=2, batch_size=8)
    runs = []
    for where in (store, changed):
        cell = CellRun(spec, where, split)
        for r in range(2):
            cell.run_round(r)
        runs.append(cell.global_vector)
    assert torch.equal(runs[0], runs[1])
    # ... whereas a change to a federation client's targets moves it
    targets[CellRun(spec, store, split).clients[0].rows["train"]] += 1.0
    moved = tmp_path / "moved"
    write_store(
        moved, dataset="linear", index=loaded.index, features=np.array(loaded.inputs),
        targets=targets, num_classes=1, sources=[], task="regression",
    )  # fmt: skip
    cell = CellRun(spec, moved, split)
    for r in range(2):
        cell.run_round(r)
    assert not torch.equal(runs[0], cell.global_vector)


def test_two_runs_are_identical_and_seeds_differ(data, tmp_path):
    store, split = data
    spec = linear_spec(epochs=2, rounds=2, batch_size=8)
    first = run_cell(spec, store, split, tmp_path / "a.json", tmp_path / "ca")
    second = run_cell(spec, store, split, tmp_path / "b.json", tmp_path / "cb")
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert first == second
    other = run_cell({**spec, "seed": 1}, store, split, tmp_path / "c.json", tmp_path / "cc")
    assert other["clients"][0]["test_mse"] != first["clients"][0]["test_mse"]
    # one model: the two federation clients and the held-out one are scored with it, and the
    # history says every federation client took part (no partial participation recorded)
    assert [c["client"] for c in first["clients"]] == [0, 1]
    assert [c["client"] for c in first["held_out_clients"]] == [2]
    assert first["history"]["participants"] == []


def test_mini_batches_shuffle_the_sorted_pooled_rows(data):
    """With batch 1 and SGD, the model after one epoch depends on the order of the pooled rows:
    it is the engine's keyed erm/shuffle permutation of the sorted rows."""
    from benchlib.fl.rng import torch_generator

    store, split = data
    cell = CellRun(linear_spec(epochs=1, batch_size=1), store, split)
    start = cell.global_vector.double().numpy()
    cell.run_round(0)
    rows = np.sort(train_rows(cell, [0, 1]))
    order = torch.randperm(len(rows), generator=torch_generator(0, "erm/shuffle", 0, 0, 0))
    x, y = store_xy(store, rows[order.numpy()])
    w, b = start[:3], start[3]
    for i in range(len(y)):
        w, b = gradient_steps(w, b, x[i : i + 1], y[i : i + 1], steps=1)
    np.testing.assert_allclose(cell.global_vector.double().numpy(), np.r_[w, b], atol=1e-5)


def test_batched_clients_never_pick_erm_up(data):
    store, split = data
    assert CellRun(linear_spec("fedavg", client_batching="on"), store, split).batched is not None
    assert CellRun(linear_spec("erm", client_batching="on"), store, split).batched is None


def test_a_malfunction_has_nothing_to_corrupt(data):
    """Nothing is transmitted: ERM with SFA on client 0 trains the same model as without."""
    store, split = data
    plain = CellRun(linear_spec(rounds=2), store, split)
    attacked = CellRun({**linear_spec(rounds=2), "malfunction": "sfa", "k": 1}, store, split)
    assert attacked.malicious == [0]
    for r in range(2):
        plain.run_round(r)
        attacked.run_round(r)
    assert torch.equal(plain.global_vector, attacked.global_vector)


def test_two_round_tpt48_cell_has_if_and_oof_entries(tmp_path):
    raw = yaml.safe_load((REPO / "config" / "tfl_tpt48.yaml").read_text())
    raw = copy.deepcopy(raw)
    raw["methods"]["erm"] = {"label": "ERM"}
    raw["experiments"]["tpt48_ew"].update(methods=["erm"], seeds=[0])
    raw["datasets"]["tpt48_ew"]["training"] = {**raw["datasets"]["tpt48_ew"]["training"],
                                               "rounds": 2, "local_epochs": 1}  # fmt: skip
    raw["datasets"]["tpt48_ew"]["model"] = {"name": "mlp", "params": {"hidden": [32, 32]}}
    raw["reports"] = {}
    config = Config(raw)
    store = tmp_path / "store"
    path = REPO.parent / "shared" / "data" / "tpt48" / tpt48.FILE
    get_dataset("tpt48_local").prepare(store, {"path": str(path)}, task="regression")
    split = tmp_path / "split.csv"
    write_split(
        make_split(load_store(store), SplitSpec.from_config(config.dataset_spec("tpt48_ew"))),
        split,
    )
    (cell,) = config.cells("tpt48_ew")
    out = tmp_path / "metrics.json"
    metrics = run_cell(config.cell_spec(cell), store, split, out, tmp_path / "ck")
    assert json.loads(out.read_text()) == metrics
    held = raw["datasets"]["tpt48_ew"]["held_out"]
    assert len(metrics["clients"]) == 24 and len(held) == 24
    assert [c["client"] for c in metrics["held_out_clients"]] == held
    for entry in metrics["clients"] + metrics["held_out_clients"]:
        assert entry["test_mse"] is not None and 0 < entry["test_mse"] < 10
    assert len(metrics["history"]["val_mse"]) == 2
