"""``benchlib bench overhead``: engine rounds of fedavg (star) and lightyear (P2P) on mnist5k
against the bare ``forward -> loss -> backward -> step`` loop in the same process.

The bare reference trains the same clients on float tensors of their rows built once up front (no
FL logic, no per-batch gather or uint8 -> float conversion, no metrics) and evaluates the same
(model, validation set) pairs with one large batch under ``inference_mode``; so the ratio
engine / bare includes the engine's per-batch gather and conversion. Prints a table; no timing is
asserted anywhere.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch

from benchlib.commands.bench.bare import (
    SETTINGS,
    BareData,
    bare_eval,
    bare_train,
    bench_data,
    bench_spec,
    median_times,
)
from benchlib.commands.bench.cells import bench_cell
from benchlib.fl.engine import CellRun
from benchlib.fl.optim import build_optimizer

Print = Callable[[str], None]


def run_benchmark(
    rounds: int = 3,
    clients: int = 8,
    samples: int = 400,
    repeats: int = 3,
    store: Path | None = None,
    out: Print = print,
) -> dict[str, dict[str, float]]:
    """Time engine rounds of fedavg (star) and lightyear (P2P) against the bare loop.

    ``store``: a prepared mnist5k store to use (default: prepare one in a temporary folder).
    Returns the ratios engine / bare per method and phase (``train``, ``round``).
    """
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        store, split, train_size = bench_data(Path(tmp), store, clients, samples)
        out(
            f"engine overhead: {clients} clients x ~{train_size} train samples, FEMNIST CNN, "
            f"{torch.get_num_threads()} threads, median of {repeats} after a warm-up"
        )
        out(f"{'method':<10} {'phase':<8} {'engine s':>9} {'bare s':>9} {'ratio':>6}")
        for method, pairs in (("fedavg", "global"), ("lightyear", "all")):
            cell = bench_cell(bench_spec(method, clients), store, split, device=torch.device("cpu"))
            data = BareData(cell)
            models = [copy.deepcopy(m) for m in cell.models]
            optimizers = [
                build_optimizer(list(m.parameters()), **SETTINGS.optimizer_fields()) for m in models
            ]
            state = {"round": 0}

            def engine_round(cell: CellRun = cell, state: dict = state) -> None:
                cell.run_round(state["round"] % rounds)
                state["round"] += 1

            def engine_train(cell: CellRun = cell) -> None:
                cell._train_all(0, cell.federation)

            median = median_times(
                {
                    "bare_train": lambda m=models, o=optimizers, c=cell, d=data: bare_train(
                        c, d, m, o
                    ),
                    "train": engine_train,
                    "bare_eval": lambda m=models, d=data, p=pairs: bare_eval(d, m, p),
                    "round": engine_round,
                },
                repeats,
            )
            rows = {
                "train": (median["train"], median["bare_train"]),
                "round": (median["round"], median["bare_train"] + median["bare_eval"]),
            }
            for phase, (ours, bare) in rows.items():
                out(f"{method:<10} {phase:<8} {ours:>9.3f} {bare:>9.3f} {ours / bare:>6.2f}")
            results[method] = {phase: ours / bare for phase, (ours, bare) in rows.items()}
    return results
