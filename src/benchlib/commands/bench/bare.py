"""The benchmarks' shared workload: mnist5k split IID, the FEMNIST CNN, and the bare
``forward -> loss -> backward -> step`` reference loop the engine is compared with."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from benchlib.data.registry import get_dataset
from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store
from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.engine import CellRun

Print = Callable[[str], None]

TRAINING = {
    "optimizer": "adam",
    "lr": 1e-3,
    "weight_decay": 1e-4,
    "batch_size": 32,
    "local_epochs": 1,
    "rounds": 100,
    "persist_optimizer": True,
}
SETTINGS = TrainingSettings(**TRAINING)  # code constants: no config check needed


def bench_spec(method: str, clients: int, **training: Any) -> dict[str, Any]:
    return {
        "experiment": "bench",
        "dataset": "mnist5k",
        "method_id": method,
        "method": method,
        "method_params": {},
        "malfunction": "none",
        "k": 0,
        "seed": 0,
        "clients": clients,
        "model": {"name": "femnist_cnn", "params": {}},
        "training": {**TRAINING, **training},
        "malfunction_params": {},
    }


class BareData:
    """The reference's data: float tensors of each client's train and val rows, built once."""

    def __init__(self, cell: CellRun) -> None:
        self.train = [cell.source.batch(c.rows["train"]) for c in cell.clients]
        self.val = [cell.source.batch(c.rows["val"])[0] for c in cell.clients]


def bare_train(
    cell: CellRun, data: BareData, models: list[torch.nn.Module], optimizers: list
) -> None:
    batch = TRAINING["batch_size"]
    for model, optimizer, (x, y) in zip(models, optimizers, data.train, strict=True):
        model.train()
        order = torch.randperm(len(y))
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            optimizer.zero_grad(set_to_none=True)
            cell.loss_fn(model(x[idx]), y[idx]).backward()
            optimizer.step()


@torch.inference_mode()
def bare_eval(data: BareData, models: list[torch.nn.Module], pairs: str) -> None:
    for model in models:
        model.eval()
    if pairs == "all":  # P2P: every client scores every model on its own validation set
        for val_x in data.val:
            for model in models:
                model(val_x)
    else:  # star: one global model scored on each validation set
        for val_x in data.val:
            models[0](val_x)


def median_times(funcs: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds of each function after one untimed warm-up call each (first-call costs
    such as allocating buffers kept across rounds are not per-round costs); the functions take
    turns (one call each per repeat), so a load that drifts during the benchmark affects all of
    them alike."""
    for func in funcs.values():
        func()
    times: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(repeats):
        for name, func in funcs.items():
            tick = time.perf_counter()
            func()
            times[name].append(time.perf_counter() - tick)
    return {name: statistics.median(values) for name, values in times.items()}


def bench_data(
    folder: Path, store: Path | None, clients: int, samples: int
) -> tuple[Path, Path, int]:
    """(store, split, train rows per client): mnist5k (prepared in ``folder`` unless ``store``)
    split IID into ``clients`` with about ``samples`` training rows each."""
    if store is None:
        store = folder / "store"
        get_dataset("mnist5k").prepare(store, {})
    per_client = len(load_store(store).index) // clients
    val = min(0.4, 100 / per_client)
    test = min(0.95 - val, max(0.05, 1 - val - samples / per_client))
    split = folder / "split.csv"
    write_split(make_split(load_store(store), SplitSpec(clients, "iid", {}, val, test, 0)), split)
    table = pd.read_csv(split)
    return store, split, int((table["subset"] == "train").sum()) // clients
