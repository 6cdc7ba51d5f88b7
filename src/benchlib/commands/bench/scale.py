"""Paper-scale benchmark (``benchlib bench scale --device DEVICE``): where a GPU-hour goes.

For each workload - a FEMNIST-CNN cell (8 clients, 28x28 grey) and a DenseNet121 cell shaped
like Camelyon17 (5 clients, 96x96 RGB patches) - it builds a synthetic store of the paper's
shapes, then times, on the same data and in the same process (the variants take turns, median
of ``repeats``):

- ``bare``: a plain ``forward -> loss -> backward -> step`` loop over the clients, one after
  another, on float tensors built once (no FL logic) plus the round's evaluations;
- ``engine sequential``: engine rounds with ``client_batching: off``;
- ``engine batched``: engine rounds with ``client_batching: on`` (models without batch norm);
  on a GPU each step is a replayed CUDA graph, and ``engine batched eager`` runs the same
  without graphs (``cuda_graphs: false``);
- ``engine batched tf32`` / ``bf16`` (or ``sequential`` where batching does not apply): the
  fastest path with a reduced ``training.precision`` (timed by default on a GPU), projected
  apart from the float32 figure.

for a FedAvg round (star) and a LIGHTYEAR round (P2P: every client scores every peer model on
its own validation set). It prints seconds per round, the ratios to the bare loop, the speed-up
of batching, training samples per second, peak memory and (on a GPU, where NVML answers) the
mean GPU utilisation, and projects each paper grid's device-hours from the measured per-round
times scaled to the paper's client sizes.

Only torch, numpy and pandas are imported (no Snakemake, pooch, MONAI or plotting): a GPU machine
may offer a different Python and torch and no package index. Timings are printed, never asserted.
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchlib.commands.bench.bare import BareData, bare_eval, bare_train
from benchlib.commands.bench.cells import bench_cell
from benchlib.commands.bench.device import GpuUtilisation, sync_device
from benchlib.commands.bench.memory import PeakRss
from benchlib.commands.bench.packing import measure_packing
from benchlib.commands.bench.synthetic import spread_rows, write_bench_split, write_synthetic_store
from benchlib.data.store import load_store
from benchlib.fl.engine import CellRun
from benchlib.fl.optim import build_optimizer
from benchlib.fl.precision import PRECISIONS

Print = Callable[[str], None]


@dataclass(frozen=True)
class Workload:
    """A cell shape: images, clients, model and training as the paper's Table 1 gives them."""

    name: str
    shape: tuple[int, ...]
    clients: int
    model: dict[str, Any]
    training: dict[str, Any]
    paper_train: int  # training samples per client at paper scale
    paper_val: int  # validation samples per client at paper scale


@dataclass(frozen=True)
class Grid:
    """A paper grid: how many cells of a workload, each of how many rounds."""

    label: str
    workload: str
    cells: int
    rounds: int


WORKLOADS = {
    # FEMNIST (TFF): 100 writers per client x ~197.5 train images per writer; val = 1/3 of the
    # writers' test images (~22.8 per writer).
    "femnist_cnn": Workload(
        name="femnist_cnn",
        shape=(28, 28),
        clients=8,
        model={"name": "femnist_cnn", "params": {}},
        training={"optimizer": "adam", "lr": 1e-3, "weight_decay": 1e-4, "batch_size": 32},
        paper_train=19_750,
        paper_val=760,
    ),
    # Camelyon17-WILDS: 455,954 patches over 5 hospitals; 80 % train and 10 % val per hospital.
    "densenet121_camelyon17": Workload(
        name="densenet121_camelyon17",
        shape=(96, 96, 3),
        clients=5,
        model={"name": "densenet121", "params": {}},
        training={
            "optimizer": "sgd",
            "lr": 1e-3,
            "momentum": 0.9,
            "weight_decay": 5e-4,
            "batch_size": 32,
        },
        paper_train=72_950,
        paper_val=9_120,
    ),
}

GRIDS = (
    Grid("LIGHTYEAR Tables 2-5 (FEMNIST)", "femnist_cnn", cells=280, rounds=12),
    Grid("LIGHTYEAR Tables 6-9 (Camelyon17)", "densenet121_camelyon17", cells=160, rounds=12),
)


def bench_data(
    folder: Path,
    name: str,
    clients: int,
    train: int,
    val: int,
    shape: tuple[int, ...],
    out: Print = print,
) -> tuple[Path, Path]:
    """A synthetic store and a split of ``clients`` x (train, val, test = val) rows spread over
    it: (store folder, split CSV)."""
    store = write_synthetic_store(folder / name, clients * (train + 2 * val), shape, out=out)
    sample_ids = load_store(store).index["sample_id"].to_numpy()
    rows = spread_rows(len(sample_ids), clients, train + 2 * val)
    split = folder / f"{name}_split.csv"
    write_bench_split(split, sample_ids, rows, train, val)
    return store, split


def _spec(
    workload: Workload,
    method: str,
    batching: str,
    cuda_graphs: bool = True,
    precision: str = "fp32",
) -> dict[str, Any]:
    training = {
        **workload.training,
        "local_epochs": 1,
        "rounds": 10_000,
        "persist_optimizer": True,
        "client_batching": batching,
        "cuda_graphs": cuda_graphs,
        "precision": precision,
    }
    return {
        "experiment": "bench_scale",
        "dataset": "bench_stream",
        "method_id": method,
        "method": method,
        "method_params": {},
        "malfunction": "none",
        "k": 0,
        "seed": 0,
        "clients": workload.clients,
        "model": copy.deepcopy(workload.model),
        "training": training,
        "malfunction_params": {},
    }


@dataclass
class Timed:
    """Median seconds per call of each variant, and what else was measured."""

    seconds: dict[str, float] = field(default_factory=dict)
    utilisation: dict[str, float | None] = field(default_factory=dict)


def _time_variants(
    variants: dict[str, Callable[[], None]], repeats: int, device: torch.device
) -> Timed:
    """Each variant once to warm up, then ``repeats`` turns; medians."""
    timed = Timed()
    samples: dict[str, list[float]] = {name: [] for name in variants}
    busy: dict[str, list[float]] = {name: [] for name in variants}
    for func in variants.values():
        func()
    sync_device(device)
    for _ in range(repeats):
        for name, func in variants.items():
            with GpuUtilisation(device) as gpu:
                tick = time.perf_counter()
                func()
                sync_device(device)
                samples[name].append(time.perf_counter() - tick)
            if gpu.mean is not None:
                busy[name].append(gpu.mean)
    for name in variants:
        timed.seconds[name] = statistics.median(samples[name])
        timed.utilisation[name] = statistics.mean(busy[name]) if busy[name] else None
    return timed


def _engine_round(cell: CellRun) -> Callable[[], None]:
    state = {"round": 0}

    def run() -> None:
        cell.run_round(state["round"])
        state["round"] += 1

    return run


def _peak_memory(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.max_memory_allocated(device) / 1024**3:.2f} GiB GPU"
    return "n/a"


def measure_workload(
    workload: Workload,
    device: torch.device,
    train: int,
    repeats: int,
    folder: Path,
    out: Print = print,
    precisions: tuple[str, ...] = (),
) -> dict[str, float]:
    """Time bare / engine sequential / engine batched rounds of fedavg and lightyear.

    ``precisions``: reduced ``training.precision`` values (``tf32``, ``bf16``) also timed on the
    engine's fastest path, as variants ``engine <path> <precision>``.
    Returns per-round seconds by ``<method>/<variant>`` at ``train`` samples per client.
    """
    val = max(32, round(train * workload.paper_val / workload.paper_train))
    store, split = bench_data(
        folder, workload.name, workload.clients, train, val, workload.shape, out
    )
    out(
        f"\n{workload.name}: {workload.clients} clients x {train} train / {val} val samples "
        f"{workload.shape}, batch {workload.training['batch_size']}, "
        f"{workload.training['optimizer']}, on {device}"
    )
    results: dict[str, float] = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for method, pairs in (("fedavg", "global"), ("lightyear", "all")):
        sequential = bench_cell(_spec(workload, method, "off"), store, split, device=device)
        variants: dict[str, Callable[[], None]] = {}
        bare = BareData(sequential)
        models = [copy.deepcopy(m) for m in sequential.models]
        fields = sequential.settings.optimizer_fields()
        optimizers = [build_optimizer(list(m.parameters()), **fields) for m in models]

        def bare_round(m=models, o=optimizers, c=sequential, d=bare, p=pairs) -> None:
            bare_train(c, d, m, o)
            bare_eval(d, m, p)

        variants["bare"] = bare_round
        variants["engine sequential"] = _engine_round(sequential)
        batched = bench_cell(_spec(workload, method, "on"), store, split, device=device)
        if batched.batched is not None:
            variants["engine batched"] = _engine_round(batched)
            if device.type == "cuda":  # the same without CUDA graphs: what capture buys
                eager = bench_cell(
                    _spec(workload, method, "on", False), store, split, device=device
                )
                variants["engine batched eager"] = _engine_round(eager)
        path = "on" if batched.batched is not None else "off"
        for precision in precisions:
            spec = _spec(workload, method, path, precision=precision)
            reduced = bench_cell(spec, store, split, device=device)
            name = f"engine {'batched' if path == 'on' else 'sequential'} {precision}"
            variants[name] = _engine_round(reduced)
        with PeakRss() as rss:
            timed = _time_variants(variants, repeats, device)
        base = timed.seconds["bare"]
        for variant, seconds in timed.seconds.items():
            busy = timed.utilisation[variant]
            results[f"{method}/{variant}"] = seconds
            out(
                f"  {method:<10} {variant:<20} {seconds:8.3f} s/round  {seconds / base:5.2f}x bare"
                f"  {workload.clients * train / seconds:9.0f} train samples/s"
                + ("" if busy is None else f"  GPU busy {busy:3.0f} %")
            )
        if "engine batched" in timed.seconds:
            speedup = timed.seconds["engine sequential"] / timed.seconds["engine batched"]
            out(f"  {method:<10} batched speed-up over sequential: {speedup:.2f}x")
        out(f"  peak memory: {_peak_memory(device)}, host RSS {rss.peak_anon / 1024**3:.2f} GiB")
    return results


def check_agreement(
    workload: Workload, device: torch.device, folder: Path, rounds: int = 2, out: Print = print
) -> float:
    """Max |difference| of the global model after ``rounds`` FedAvg rounds, batched vs
    sequential, with dropout off (the two paths draw dropout masks differently)."""
    train, val = 256, 64
    store, split = bench_data(
        folder,
        f"{workload.name}_check",
        workload.clients,
        train,
        val,
        workload.shape,
        out=lambda _: None,
    )
    paths = {"sequential": ("off", True), "batched": ("on", True)}
    if device.type == "cuda":
        paths["batched eager"] = ("on", False)
    vectors = {}
    for name, (batching, graphs) in paths.items():
        spec = _spec(workload, "fedavg", batching, graphs)
        spec["model"]["params"]["dropout"] = 0.0
        cell = bench_cell(spec, store, split, device=device)
        for round_index in range(rounds):
            cell.run_round(round_index)
        vectors[name] = cell.global_vector.double()
    difference = float((vectors["sequential"] - vectors["batched"]).abs().max())
    scale = float(vectors["sequential"].abs().max())
    out(
        f"{workload.name}: batched vs sequential after {rounds} FedAvg rounds on {device}: "
        f"max |difference| {difference:.2e} (largest weight {scale:.2f})"
    )
    if "batched eager" in vectors:
        graphs = float((vectors["batched eager"] - vectors["batched"]).abs().max())
        out(f"{workload.name}: CUDA graphs vs eager batched: max |difference| {graphs:.2e}")
    return difference


def check_methods(device: torch.device, folder: Path, out: Print = print) -> dict[str, str]:
    """Two rounds of every cataloged method under SFA (k = 2 of 8) on ``device``: proves each
    method's arithmetic runs where the data is (a CPU-only tensor in a GPU cell fails here)."""
    from benchlib.methods.catalog import METHODS

    workload = WORKLOADS["femnist_cnn"]
    train, val = 64, 32
    store, split = bench_data(
        folder, "methods_check", 8, train, val, workload.shape, out=lambda _: None
    )
    results = {}
    for method in METHODS.names():
        spec = _spec(workload, method, "auto")
        spec.update(clients=8, malfunction="sfa", k=2)
        spec["model"]["params"] = {"conv1": 4, "conv2": 8, "hidden": 32}
        try:
            cell = bench_cell(spec, store, split, device=device)
            for round_index in range(2):
                cell.run_round(round_index)
            results[method] = "ok"
        except Exception as error:  # report every method, do not stop at the first
            results[method] = f"{type(error).__name__}: {error}"
    out(f"\nevery method, 2 rounds on {device}:")
    for method, result in results.items():
        out(f"  {method:<12} {result}")
    return results


def _precision_of_variant(variant: str) -> str:
    last = variant.rsplit(" ", 1)[-1]
    return last if last in PRECISIONS else "fp32"


def project_grids(
    measured: dict[str, dict[str, float]],
    train: dict[str, int],
    packed: dict[str, dict[int, float]] | None = None,
    out: Print = print,
) -> dict[str, float]:
    """Device-hours of each paper grid from the measured rounds, scaled to paper client sizes.

    A grid cell's round is taken as the mean of a FedAvg and a LIGHTYEAR round (the grids mix
    star and P2P methods), each on the fastest engine path measured in float32 (the default
    ``training.precision``). Where ``packed`` gives the effective seconds per cell-round with n
    cells sharing the device (:mod:`bench_packing`), the best of those is used when it is
    faster, and the line says how many cells were packed. Reduced precisions that were measured
    get their own lines (keys ``<grid> [<precision>]``), never mixed into the float32 figure.
    """
    out("\nprojected device-hours per paper grid (engine, fastest path, paper client sizes):")
    hours = {}
    measured_precisions = {
        _precision_of_variant(key.split("/", 1)[1]) for runs in measured.values() for key in runs
    }
    for precision in [p for p in PRECISIONS if p in measured_precisions]:
        for grid in GRIDS:
            if grid.workload not in measured:
                continue
            workload = WORKLOADS[grid.workload]
            scale = workload.paper_train / train[grid.workload]
            per_method = []
            for method in ("fedavg", "lightyear"):
                times = [
                    s
                    for key, s in measured[grid.workload].items()
                    if key.startswith(f"{method}/e")
                    and _precision_of_variant(key.split("/", 1)[1]) == precision
                ]
                per_method.append(min(times))
            seconds, how = statistics.mean(per_method), "1 cell per device"
            if precision == "fp32":
                for count, effective in (packed or {}).get(grid.workload, {}).items():
                    if effective < seconds:
                        seconds, how = effective, f"{count} cells per device"
            else:
                how = f"training.precision: {precision}"
            round_seconds = seconds * scale
            label = grid.label if precision == "fp32" else f"{grid.label} [{precision}]"
            hours[label] = grid.cells * grid.rounds * round_seconds / 3600
            out(
                f"  {label:<43} {grid.cells} cells x {grid.rounds} rounds x "
                f"{round_seconds:6.2f} s = {hours[label]:7.2f} h ({how})"
            )
    return hours


def run_scale_benchmark(
    device: torch.device,
    workloads: tuple[str, ...] = tuple(WORKLOADS),
    train: int | None = None,
    repeats: int = 3,
    packing: tuple[int, ...] | None = None,
    out: Print = print,
    precisions: tuple[str, ...] | None = None,
) -> dict[str, dict[str, float]]:
    """Measure every workload on ``device`` and project the paper grids.

    ``train``: training samples per client (default: the paper's on a GPU for FEMNIST, 2,000
    for DenseNet121; 200 on CPU). ``packing``: numbers of cells to run at once on the device
    (default (1, 2, 4) on a GPU, none on CPU). ``precisions``: reduced ``training.precision``
    values also timed (default ``tf32`` and ``bf16`` on a GPU, none on CPU).
    """
    if packing is None:
        packing = (1, 2, 4) if device.type == "cuda" else ()
    if precisions is None:
        precisions = ("tf32", "bf16") if device.type == "cuda" else ()
    precisions = tuple(p for p in precisions if p != "fp32")
    measured, sizes, packed = {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        if "femnist_cnn" in workloads:
            check_methods(device, Path(tmp), out=out)
            check_agreement(WORKLOADS["femnist_cnn"], device, Path(tmp), out=out)
        for name in workloads:
            workload = WORKLOADS[name]
            if train is not None:
                size = train
            elif device.type == "cuda":
                size = min(workload.paper_train, 20_000 if name == "femnist_cnn" else 2_000)
            else:
                size = 200
            sizes[name] = size
            measured[name] = measure_workload(
                workload, device, size, repeats, Path(tmp), out, precisions
            )
            if packing:
                packed[name] = _measure_packing(workload, device, size, packing, Path(tmp), out)
    project_grids(measured, sizes, packed, out)
    return measured


def _measure_packing(
    workload: Workload,
    device: torch.device,
    train: int,
    packing: tuple[int, ...],
    folder: Path,
    out: Print,
) -> dict[int, float]:
    val = max(32, round(train * workload.paper_val / workload.paper_train))
    store, split = bench_data(
        folder, f"{workload.name}_pack", workload.clients, train, val, workload.shape, out
    )
    out(f"\n{workload.name}: several cells at once on {device} (FedAvg and LIGHTYEAR alternately)")
    return measure_packing(
        lambda method: _spec(workload, method, "auto"), store, split, device, packing, out=out
    )


if __name__ == "__main__":  # python -m benchlib.commands.bench.scale [device]: no CLI dependencies
    import sys

    run_scale_benchmark(
        torch.device(sys.argv[1] if len(sys.argv) > 1 else "cpu"),
        repeats=int(sys.argv[2]) if len(sys.argv) > 2 else 3,
    )
