"""Lock-step batched client training (fl/batched.py) against the sequential path.

The batched path draws dropout masks from its own keyed stream, so the whole-cell comparisons
run the smoke model with dropout switched off (``dropout: 0``); everything else (data order,
optimizer state, uneven client sizes, aggregation) is the same computation up to float rounding.
"""

from __future__ import annotations

import copy
import json
import logging

import numpy as np
import pytest
import torch
from helpers.specs import filled_spec
from torch import nn

from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.batched import (
    BatchedClients,
    StackedOptimizer,
    flatten_parameters,
    parameter_views,
    why_not_batched,
)
from benchlib.fl.data import BatchSource
from benchlib.fl.engine import CellRun, run_cell
from benchlib.fl.loops import train_epoch
from benchlib.fl.rng import torch_generator
from benchlib.fl.transforms import Transforms
from benchlib.tasks import get_task


def _linear_clients(count: int, seed: int = 0) -> list[nn.Module]:
    torch.manual_seed(seed)
    return [nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) for _ in range(count)]


@pytest.mark.parametrize(
    ("make", "fused"),
    [
        (lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1), False),
        (lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.1), True),
        (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01), None),
        (lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True), None),
        (lambda p: torch.optim.SGD(p, lr=0.05), None),
    ],
    ids=["adam", "adam-fused", "sgd-momentum", "sgd-nesterov", "sgd-plain"],
)
def test_stacked_optimizer_matches_torch_per_client_with_masked_steps(make, fused):
    reference = _linear_clients(3)
    batched = copy.deepcopy(reference)
    ref_opts = [make(m.parameters()) for m in reference]
    opts = [make(m.parameters()) for m in batched]
    generator = torch.Generator().manual_seed(1)
    # client 2 sits out steps 1 and 3, client 0 step 2: step counts diverge across clients;
    # "adam-fused" takes the GPU's fused Adam kernel (here on CPU) on the all-active steps 0, 4
    schedule = [
        [True, True, True],
        [True, True, False],
        [False, True, True],
        [True, True, False],
        [True, True, True],
    ]
    for step, active in enumerate(schedule):
        flat = flatten_parameters(batched)
        grad = torch.randn(flat.shape, generator=generator)
        views = parameter_views(reference[0], grad)
        for client, model in enumerate(reference):
            if active[client]:
                for name, param in model.named_parameters():
                    param.grad = views[name][client].clone()
                ref_opts[client].step()
        state = StackedOptimizer.gather(opts, batched)
        state.step(flat, grad, np.array(active), fused=fused)
        new = parameter_views(reference[0], flat)
        with torch.no_grad():
            for client, model in enumerate(batched):
                for name, param in model.named_parameters():
                    param.copy_(new[name][client])
        state.scatter(opts, batched)  # round trip through torch state every step
        for ref, got in zip(reference, batched, strict=True):
            for (name, a), (_, b) in zip(
                ref.named_parameters(), got.named_parameters(), strict=True
            ):
                torch.testing.assert_close(b, a, rtol=1e-6, atol=1e-7, msg=f"step {step} {name}")
    for ref_opt, opt in zip(ref_opts, opts, strict=True):
        for a, b in zip(ref_opt.state.values(), opt.state.values(), strict=True):
            assert a.keys() == b.keys()
            for key in a:
                torch.testing.assert_close(torch.as_tensor(b[key]), torch.as_tensor(a[key]))


@pytest.mark.parametrize(
    ("mode", "augment"),
    [("resident", False), ("stream", False), ("resident", True)],
    ids=["resident", "stream", "augmented"],
)
def test_batched_epoch_equals_sequential_epochs_with_uneven_clients(mode, augment):
    rng = np.random.default_rng(0)
    inputs = rng.integers(0, 256, size=(90, 8, 8), dtype=np.uint8)
    labels = rng.integers(0, 3, size=90).astype(np.int64)
    task = get_task("classification")
    transforms = Transforms(
        {"train": [{"name": "RandomHorizontalFlip", "p": 0.5}]} if augment else None
    )
    source = BatchSource(inputs, labels, task, np.arange(90), transforms=transforms, mode=mode)
    rows = [np.arange(0, 40), np.arange(40, 57), np.arange(57, 90)]  # 40, 17 and 33 rows
    torch.manual_seed(0)
    template = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(72, 3))
    sequential = [copy.deepcopy(template) for _ in rows]
    batched = [copy.deepcopy(template) for _ in rows]
    training = TrainingSettings.from_config(
        "training",
        {"optimizer": "adam", "lr": 0.01, "batch_size": 8, "local_epochs": 2, "rounds": 1},
    )
    seq_opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in sequential]
    bat_opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in batched]
    loss_fn = nn.CrossEntropyLoss()
    for client, (model, opt) in enumerate(zip(sequential, seq_opts, strict=True)):
        for epoch in range(2):
            generator = torch_generator(7, "train/shuffle", 3, client, epoch)
            train_epoch(
                model,
                opt,
                source,
                rows[client],
                8,
                generator,
                loss_fn,
                augment_key=(7, "train", 3, client, epoch),
            )
    keys = [(7, "train", 3, client) for client in range(3)]
    BatchedClients(template, loss_fn).train(batched, bat_opts, rows, source, training, keys)
    for a, b in zip(sequential, batched, strict=True):
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(pb, pa, rtol=1e-5, atol=1e-6)
    steps = [float(next(iter(o.state.values()))["step"]) for o in bat_opts]
    assert steps == [10.0, 6.0, 10.0]  # ceil(40/8), ceil(17/8), ceil(33/8) per epoch, x2


def _no_dropout(spec: dict, batching: str, rounds: int = 3) -> dict:
    spec = copy.deepcopy(spec)
    spec["model"]["params"]["dropout"] = 0.0
    spec["training"].update(rounds=rounds, client_batching=batching)
    return spec


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("fedavg", {}),
        ("lightyear", {}),
        # the hooks around local training: a proximal pull (FedProx), a model loaded before
        # training (CFL's cluster models), a personal model trained after it (Ditto)
        ("fedprox", {"mu": 0.5}),
        ("cfl", {}),
        ("ditto", {"lam": 0.5}),
    ],
)
def test_batched_cell_matches_sequential_cell_over_three_rounds(
    method, params, mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    results = {}
    for batching in ("off", "on"):
        spec = _no_dropout(smoke_cell_spec("fedavg", "sfa", 1), batching)
        spec.update(method=method, method_id=method, method_params=params)
        out = tmp_path / batching / "metrics.json"
        run_cell(filled_spec(spec), mnist_store, smoke_split, out, tmp_path / batching / "ckpt")
        results[batching] = json.loads(out.read_text())
    seq, bat = results["off"], results["on"]
    assert np.allclose(
        np.array(bat["history"]["val_accuracy"]),
        np.array(seq["history"]["val_accuracy"]),
        atol=0.011,  # at most a sample or two of ~190 may flip on float rounding
    )
    assert bat["history"]["selections"] == seq["history"]["selections"]
    for a, b in zip(seq["clients"], bat["clients"], strict=True):
        assert b["test_accuracy"] == pytest.approx(a["test_accuracy"], abs=0.011)


def test_batched_path_really_batches_and_sequential_path_is_unchanged(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path, caplog
):
    spec = _no_dropout(smoke_cell_spec("fedavg", "none", 0), "on", rounds=1)
    with caplog.at_level(logging.INFO, logger="benchlib"):
        cell = CellRun(spec, mnist_store, smoke_split)
    assert cell.batched is not None and "clients train batched" in caplog.text
    cell.run_round(0)
    off = CellRun(_no_dropout(spec, "off", rounds=1), mnist_store, smoke_split)
    off.run_round(0)
    assert off.batched is None
    torch.testing.assert_close(cell.global_vector, off.global_vector, rtol=1e-4, atol=1e-5)
    # auto on CPU keeps the sequential path (CPU results stay byte-identical to before)
    auto = CellRun(_no_dropout(spec, "auto", rounds=1), mnist_store, smoke_split)
    assert auto.batched is None


def test_batched_resume_is_byte_identical(mnist_store, smoke_split, smoke_cell_spec, tmp_path):
    spec = smoke_cell_spec("lightyear", "sfa", 1)  # with dropout: batched stream is keyed too
    spec["training"].update(rounds=3, client_batching="on")
    whole = tmp_path / "whole" / "metrics.json"
    run_cell(spec, mnist_store, smoke_split, whole, tmp_path / "whole" / "ckpt")
    part = tmp_path / "part"
    run_cell(spec, mnist_store, smoke_split, part / "m.json", part / "ckpt", stop_after=2)
    run_cell(spec, mnist_store, smoke_split, part / "m.json", part / "ckpt")
    assert (part / "m.json").read_bytes() == whole.read_bytes()


def test_why_not_batched_names_the_reason():
    models = _linear_clients(2)
    adam = [torch.optim.Adam(m.parameters()) for m in models]
    assert why_not_batched(models, adam, nn.CrossEntropyLoss()) is None
    assert "not a mean" in why_not_batched(models, adam, nn.CrossEntropyLoss(weight=torch.ones(2)))
    assert "private" in why_not_batched(models, adam, nn.MSELoss(), ("head.",))
    mixed = [adam[0], torch.optim.SGD(models[1].parameters(), lr=0.1)]
    assert "Adam or SGD" in why_not_batched(models, mixed, nn.MSELoss())
    different = [torch.optim.Adam(models[0].parameters(), lr=0.1), adam[1]]
    assert "differ" in why_not_batched(models, different, nn.MSELoss())
    norm = [nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)) for _ in range(2)]
    opts = [torch.optim.Adam(m.parameters()) for m in norm]
    assert "BatchNorm1d" in why_not_batched(norm, opts, nn.MSELoss())


def test_methods_with_their_own_local_training_stay_sequential(
    mnist_store, smoke_split, smoke_cell_spec, caplog
):
    spec = _no_dropout(smoke_cell_spec("fedavg", "none", 0), "on", rounds=1)
    spec.update(method="drfa", method_id="drfa", method_params={})
    with caplog.at_level(logging.INFO, logger="benchlib"):
        cell = CellRun(filled_spec(spec), mnist_store, smoke_split)
    assert cell.batched is None
    assert "method drfa trains its clients its own way" in caplog.text
