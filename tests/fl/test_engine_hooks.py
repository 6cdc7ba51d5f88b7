"""Tasks through the real engine, and the extension points the suites build on.

Tiny segmentation (masks, Dice) and regression (tabular rows, MSE) cells run end to end on
generated stores; each engine hook (participants, client reports, private parameters, per-client
initialisation, held-out clients) has a test that fails if the engine ignored it.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from helpers.task_stores import groups_split, regression_store, segmentation_store, task_cell_spec

from benchlib.fl.data import BatchSource, ClientData
from benchlib.fl.engine import CellRun, run_cell
from benchlib.fl.transforms import Transforms
from benchlib.methods.base import StarRound, sample_clients
from benchlib.methods.fedavg import FedAvg
from benchlib.primitives.seeding import numpy_rng
from benchlib.tasks import get_task


@pytest.fixture(scope="module")
def seg_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("seg")
    store = segmentation_store(root / "store")
    return store, groups_split(store, root / "split.csv")


@pytest.fixture(scope="module")
def tab_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tab")
    store = regression_store(root / "store")
    return store, groups_split(store, root / "split.csv")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fedavg", "lightyear"])
def test_tiny_segmentation_cell_reports_dice(seg_data, tmp_path, method):
    store, split = seg_data
    spec = task_cell_spec("segmentation", method)
    metrics = run_cell(spec, store, split, tmp_path / "m.json", tmp_path / "ck")
    assert metrics["task"] == "segmentation" and metrics["primary_metric"] == "dice"
    for client in metrics["clients"]:
        assert 0.0 <= client["test_dice"] <= 1.0 and 0.5 < client["test_pixel_accuracy"] <= 1
    assert len(metrics["history"]["val_dice"]) == 2
    if method == "lightyear":  # the agreement score worked per pixel with Dice (paper Eq. 16)
        scores = metrics["history"]["scores"][0]
        assert all(0 <= s <= 1 for row in scores for s in row if s is not None)
    assert json.loads((tmp_path / "m.json").read_text()) == metrics


@pytest.mark.slow
def test_tiny_regression_cell_learns_the_linear_target(tab_data, tmp_path):
    store, split = tab_data
    spec = task_cell_spec("regression", training={**task_cell_spec("regression")["training"],
                                                  "rounds": 4})  # fmt: skip
    metrics = run_cell(spec, store, split, tmp_path / "m.json", tmp_path / "ck")
    assert metrics["primary_metric"] == "mse" and len(metrics["history"]["val_mse"]) == 4
    # predicting 0 costs E[(x.w)^2] = |w|^2 ~ 1.1; the trained model must do far better
    assert all(client["test_mse"] < 0.3 for client in metrics["clients"])


def test_a_peer_scoring_method_on_regression_fails_clearly(tab_data, tmp_path):
    store, split = tab_data
    cell = CellRun(task_cell_spec("regression", "lightyear"), store, split)
    with pytest.raises(Exception, match="no class predictions for peer scoring"):
        cell.run_round(0)


def test_store_task_must_match_the_cell_task(seg_data):
    store, split = seg_data
    with pytest.raises(Exception, match="holds a segmentation dataset but the cell's task is"):
        CellRun(task_cell_spec("regression"), store, split)


# ------------------------------------------------------------------------------ hooks
class SampledFedAvg(FedAvg):
    """FedAvg with two clients per round drawn by weight, recording the reports it gets."""

    def __init__(self) -> None:
        super().__init__(weighting="samples", gamma=1.0)
        self.seen: list[tuple[list[int], list[Any]]] = []

    def participants(self, round, clients, rng):
        return sample_clients([1.0] * len(clients), 2, rng)

    def client_report(self, training, client, round):
        return {"client": client, "val": training.evaluate(client, training.layout.flatten(
            training.models[client]))}  # fmt: skip

    def aggregate(self, global_vector, received, info: StarRound):
        self.seen.append((info.participants, info.reports))
        assert received.shape[0] == len(info.participants) == len(info.train_sizes)
        return super().aggregate(global_vector, received, info)


def test_partial_participation_and_client_reports(tab_data):
    store, split = tab_data
    cell = CellRun(task_cell_spec("regression"), store, split)
    cell.method = SampledFedAvg()
    cell.method.setup(cell.num_clients, cell.rounds, cell.seed)
    before = [cell.layout.flatten(m) for m in cell.models]
    cell.run_round(0)
    chosen, reports = cell.method.seen[0]
    assert chosen == sample_clients([1.0] * 4, 2, numpy_rng(0, "participants", 0))
    assert len(chosen) == 2 and [r["client"] for r in reports] == chosen
    assert all(np.isfinite(r["val"]) for r in reports)
    assert cell.history.participants == [chosen]
    for client in range(4):  # only participants trained
        changed = not torch.equal(cell.layout.flatten(cell.models[client]), before[client])
        assert changed == (client in chosen)


class PrivateHeadFedAvg(FedAvg):
    private_prefixes = ("2.",)  # the mlp's output layer stays with each client


def test_private_parameters_are_never_averaged(tab_data):
    store, split = tab_data
    spec = task_cell_spec("regression")
    cell = CellRun(spec, store, split)
    assert cell.layout.names == ("0.weight", "0.bias", "2.weight", "2.bias")
    cell.method = PrivateHeadFedAvg(weighting="samples", gamma=1.0)
    cell._build_models()  # layouts follow the method's private parameters
    assert cell.layout.names == ("0.weight", "0.bias")
    assert cell.global_vector.numel() == sum(p.numel() for p in cell.models[0][0].parameters())
    cell.run_round(0)
    heads = [m.state_dict()["2.weight"].clone() for m in cell.models]
    assert not torch.equal(heads[0], heads[1])  # trained on own data, never averaged
    cell.run_round(1)  # loading the global model at the start of the round keeps each head
    rows = cell.clients[0].rows["test"]
    outputs = [cell.scoring.outputs(cell.global_vector, rows, client) for client in (0, 1)]
    assert not torch.equal(outputs[0], outputs[1])  # scored with each client's own head


def test_per_client_initialisation(tab_data):
    store, split = tab_data
    shared = CellRun(task_cell_spec("regression"), store, split)
    vectors = [shared.layout.flatten(m) for m in shared.models]
    assert all(torch.equal(v, vectors[0]) for v in vectors)
    spec = task_cell_spec("regression", model={"name": "mlp", "params": {"hidden": [16]},
                                                 "init": "per_client"})  # fmt: skip
    separate = CellRun(spec, store, split)
    vectors = [separate.layout.flatten(m) for m in separate.models]
    assert len({tuple(v.tolist()) for v in vectors}) == 4
    again = CellRun(spec, store, split)
    assert all(
        torch.equal(a, separate.layout.flatten(b))
        for a, b in zip(vectors, again.models, strict=True)
    )


@pytest.mark.parametrize("method", ["fedavg", "p2p_fedavg"])
def test_held_out_clients_never_train_and_are_scored_apart(tab_data, tmp_path, method):
    store, split = tab_data
    spec = task_cell_spec("regression", method, held_out=[3], k=1, malfunction="sfa")
    cell = CellRun(spec, store, split)
    assert cell.federation == [0, 1, 2] and 3 not in cell.malicious
    start = cell.layout.flatten(cell.models[3])
    metrics = run_cell(spec, store, split, tmp_path / "m.json", tmp_path / "ck")
    assert [c["client"] for c in metrics["clients"]] == [0, 1, 2]
    assert [c["client"] for c in metrics["held_out_clients"]] == [3]
    assert metrics["held_out_clients"][0]["test_mse"] is not None
    assert all(len(row) == 3 for row in metrics["history"]["val_mse"])
    trained = CellRun(spec, store, split)
    for r in range(2):
        trained.run_round(r)
    assert torch.equal(trained.layout.flatten(trained.models[3]), start)


# ---------------------------------------------------------------------- streaming data
def test_stream_and_resident_batches_are_identical(tmp_path):
    store = segmentation_store(tmp_path / "store", n=20)
    from benchlib.data.store import load_store

    data = load_store(store)
    rows = np.arange(20)
    clients = [ClientData({"train": rows[:10], "val": rows[10:15], "test": rows[15:]})]
    task = get_task("segmentation")
    sources = [
        BatchSource.of_store(data, task, clients, torch.device("cpu"), Transforms(), mode)
        for mode in ("resident", "stream")
    ]
    assert [s.mode for s in sources] == ["resident", "stream"]
    picks = np.array([7, 2, 19, 2])
    (xr, yr), (xs, ys) = (s.batch(picks) for s in sources)
    assert xr.dtype == torch.float32 and xr.shape == (4, 1, 32, 32)
    assert torch.equal(xr, xs) and torch.equal(yr, ys)
    expected = torch.from_numpy(np.asarray(data.pixels[picks])).float().div(255)[:, None]
    assert torch.equal(xr, expected)


def test_augmentation_draws_per_sample_and_is_seeded():
    transforms = Transforms(
        {"train": [{"name": "RandomHorizontalFlip", "p": 0.5}],
         "normalize": {"mean": [0.5], "std": [0.25]}}
    )  # fmt: skip
    image = torch.arange(4.0).reshape(1, 1, 2, 2) / 4
    batch = image.repeat(16, 1, 1, 1)
    labels = torch.zeros(16, dtype=torch.long)
    a, _ = transforms.augment(batch, labels, seed=11)
    b, _ = transforms.augment(batch, labels, seed=11)
    c, _ = transforms.augment(batch, labels, seed=12)
    assert torch.equal(a, b) and not torch.equal(a, c)
    flipped = (a == image.flip(-1)).flatten(1).all(dim=1)
    kept = (a == image).flatten(1).all(dim=1)
    assert bool((flipped | kept).all()) and 0 < int(flipped.sum()) < 16  # per-sample draws
    assert torch.allclose(transforms.normalize(image), (image - 0.5) / 0.25)


def test_segmentation_masks_follow_their_images():
    transforms = Transforms({"train": [{"name": "RandomHorizontalFlip", "p": 0.5}]})
    image = torch.zeros(8, 1, 2, 2)
    image[:, 0, 0, 0] = 1.0
    masks = torch.zeros(8, 2, 2, dtype=torch.long)
    masks[:, 0, 0] = 1
    x, y = transforms.augment(image, masks, seed=3)
    assert torch.equal((x[:, 0] == 1.0).long(), y)


def test_unknown_transform_is_a_clear_error():
    with pytest.raises(Exception, match=r"train\.0\.name: 'Solarize' is not one of"):
        Transforms({"train": [{"name": "Solarize"}]})
