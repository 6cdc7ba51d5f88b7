"""The Flower comparison of `benchlib bench`: same workload as the engine, and a clear skip.

Flower itself is an optional extra that CI does not install; what is tested here without it is
that the Flower clients' training (``client_fit``) plus FedAvg's weighted mean is the engine's
FedAvg cell (so the timed comparison is like for like), and the skip message.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from benchlib.commands.bench.bare import bench_data, bench_spec
from benchlib.commands.bench.cells import bench_cell
from benchlib.commands.bench.flower import (
    FlowerWorkload,
    client_accuracy,
    client_fit,
    fedavg_by_hand,
    flower_missing,
    max_difference,
    run_flower_comparison,
)
from benchlib.fl.engine import CellRun


@pytest.fixture
def small_cell(tmp_path: Path, mnist_store: Path):
    def build(**training) -> CellRun:
        store, split, _ = bench_data(tmp_path, mnist_store, clients=3, samples=48)
        spec = bench_spec("fedavg", 3, persist_optimizer=False, batch_size=16, **training)
        return bench_cell(spec, store, split, torch.device("cpu"))

    return build


def _global_state(cell: CellRun) -> dict[str, torch.Tensor]:
    model = cell.scratch
    cell.layout.load(model, cell.global_vector)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_flower_clients_train_what_the_engine_trains(small_cell):
    workload = FlowerWorkload.of_cell(small_cell())
    cell = small_cell()
    assert max_difference(workload.initial_state(), _global_state(cell)) == 0
    for round_index in range(2):
        cell.run_round(round_index)
    by_hand = fedavg_by_hand(workload, rounds=2)
    assert max_difference(by_hand, _global_state(cell)) < 1e-5
    # the check can fail: one client trained without its keyed shuffle drifts far apart
    moved = client_fit(workload, 0, workload.initial_state(), 0)
    assert max_difference(moved, workload.initial_state()) > 1e-3


def test_client_accuracy_is_the_engine_validation_accuracy(small_cell):
    cell = small_cell()
    cell.run_round(0)
    workload = FlowerWorkload.of_cell(cell)
    state = _global_state(cell)
    ours = [client_accuracy(workload, c, state) for c in range(3)]
    assert ours == pytest.approx(cell.history.val[-1], abs=1e-6)


def test_missing_flower_is_skipped_with_the_install_hint(monkeypatch, mnist_store):
    monkeypatch.setitem(sys.modules, "flwr", None)  # makes `import flwr...` raise ImportError
    message = flower_missing()
    assert message is not None and "flwr" in message and ".[bench]" in message
    lines: list[str] = []
    assert run_flower_comparison(rounds=1, store=mnist_store, out=lines.append) is None
    assert lines == [message]
