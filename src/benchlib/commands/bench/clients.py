"""``benchlib bench clients``: how a round's cost grows with the number of clients.

One FedAvg (star) and one LIGHTYEAR (P2P) round at each federation size, on CPU, with the same
per-client work at every size: each client trains on ``train`` mnist5k rows and validates on
``evaluate`` rows (fixed counts, not fractions), with a small FEMNIST CNN. Per size and method it
prints the round time, the training time per client and, for LIGHTYEAR, the aggregation time
per peer evaluation (each receiving client scores every other client's model on its validation
rows: n (n - 1) evaluations a round). Star rounds should grow linearly in n and the peer
evaluations by n^2, so time per client and time per evaluation should stay flat. Each timed
round follows one untimed round (first-call allocations). No timing is asserted anywhere.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from benchlib.commands.bench.bare import bench_spec
from benchlib.commands.bench.cells import bench_cell
from benchlib.commands.bench.synthetic import spread_rows, write_bench_split
from benchlib.data.registry import get_dataset
from benchlib.data.store import load_store
from benchlib.fl.engine import CellRun

Print = Callable[[str], None]
SMALL_CNN = {"conv1": 8, "conv2": 16, "hidden": 64, "dropout": 0.25}  # the demo's CNN
METHODS = ("fedavg", "lightyear")


@contextmanager
def _timed(cell: CellRun, name: str, spent: dict[str, float]) -> Iterator[None]:
    """Time every call of ``cell.<name>`` into ``spent[name]`` (an instance-level wrapper)."""
    original = getattr(cell, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        tick = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - tick

    setattr(cell, name, wrapper)
    try:
        yield
    finally:
        delattr(cell, name)


def _count_peer_evaluations(cell: CellRun, counter: dict[str, int]) -> None:
    """Count the models each receiving client's evaluator scores (its own and its peers')."""
    make = cell.scoring.peer_evaluator

    def counting(client: int) -> Any:
        evaluator = make(client)
        scoring_many = evaluator.scoring_many

        def counted(vectors: Sequence[torch.Tensor]) -> Any:
            counter["evaluations"] += len(vectors)
            return scoring_many(vectors)

        evaluator.scoring_many = counted  # type: ignore[method-assign]
        return evaluator

    cell.scoring.peer_evaluator = counting  # type: ignore[method-assign]


def time_round(
    method: str, clients: int, store: Path, split: Path, threads: int | None = None
) -> dict[str, float]:
    """Seconds of one round of ``method`` (after an untimed one): the whole round, local
    training, and aggregation; plus how many models the peers' evaluators scored."""
    spec = bench_spec(method, clients)
    spec["model"]["params"] = dict(SMALL_CNN)
    cell = bench_cell(spec, store, split, device=torch.device("cpu"))
    counter = {"evaluations": 0}
    _count_peer_evaluations(cell, counter)
    cell.run_round(0)  # untimed
    counter["evaluations"] = 0
    spent: dict[str, float] = {}
    aggregate = "_aggregate_star" if method == "fedavg" else "_aggregate_p2p"
    with _timed(cell, "_train_all", spent), _timed(cell, aggregate, spent):
        tick = time.perf_counter()
        cell.run_round(1)
        spent["round"] = time.perf_counter() - tick
    return {
        "round": spent["round"],
        "train": spent["_train_all"],
        "aggregate": spent[aggregate],
        "evaluations": float(counter["evaluations"]),
    }


def bench_split(folder: Path, store: Path, clients: int, train: int, evaluate: int) -> Path:
    """A split of ``store``: every client gets ``train`` training rows and ``evaluate`` rows
    each for validation and test, drawn at random from the whole store."""
    data = load_store(store)
    rows = spread_rows(len(data.index), clients, train + 2 * evaluate)
    path = folder / f"split_{clients}.csv"
    write_bench_split(path, data.index["sample_id"].to_numpy(), rows, train, evaluate)
    return path


def run_client_scaling(
    sizes: Sequence[int] = (8, 32, 128),
    train: int = 16,
    evaluate: int = 10,
    store: Path | None = None,
    out: Print = print,
) -> dict[str, dict[int, dict[str, float]]]:
    """Time one FedAvg and one LIGHTYEAR round at each federation size in ``sizes``; print a
    table and return the seconds per method and size (see :func:`time_round`)."""
    results: dict[str, dict[int, dict[str, float]]] = {m: {} for m in METHODS}
    with tempfile.TemporaryDirectory(prefix="bench-clients-") as tmp:
        if store is None:
            store = Path(tmp) / "store"
            get_dataset("mnist5k").prepare(store, {})
        out(
            f"client scaling: {train} train and {evaluate} validation rows per client, "
            f"FEMNIST CNN {SMALL_CNN}, CPU, {torch.get_num_threads()} threads, one round after "
            "an untimed one"
        )
        out(
            f"{'method':<10} {'clients':>7} {'round s':>8} {'train/client ms':>16} "
            f"{'peer evals':>10} {'agg/eval ms':>12}"
        )
        for clients in sizes:
            split = bench_split(Path(tmp), store, clients, train, evaluate)
            for method in METHODS:
                t = time_round(method, clients, store, split)
                results[method][clients] = t
                per_eval = (
                    f"{1000 * t['aggregate'] / t['evaluations']:>12.3f}"
                    if t["evaluations"]
                    else f"{'-':>12}"
                )
                out(
                    f"{method:<10} {clients:>7} {t['round']:>8.2f} "
                    f"{1000 * t['train'] / clients:>16.2f} {int(t['evaluations']):>10} {per_eval}"
                )
    return results
