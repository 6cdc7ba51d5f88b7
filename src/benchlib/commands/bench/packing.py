"""Several cells on one device at once: what packing buys (``benchlib bench scale --pack``).

The SLURM profile can put several ``run_cell`` jobs on one GPU (``BENCHLIB_CELLS_PER_GPU``);
they then run as concurrent processes sharing the device. Here ``n`` processes each build a cell
of the same workload (alternately FedAvg and LIGHTYEAR, as the paper grids mix star and P2P
methods), train one warm-up round, wait for a common start, and train ``rounds`` more. The wall
time from the start to the last finish gives the effective seconds per cell-round at ``n`` cells
per device, and the ratio to ``n = 1`` is the speed-up of packing.

Imports only torch, numpy and pandas (like :mod:`benchlib.commands.bench.scale`). Timings are
printed, never asserted.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable
from pathlib import Path
from queue import Empty
from typing import Any

import torch

from benchlib.commands.bench.device import sync_device

Print = Callable[[str], None]

METHODS = ("fedavg", "lightyear")


def _packed_cell(
    spec: dict[str, Any],
    store: str,
    split: str,
    device: str,
    rounds: int,
    ready: Any,
    start: Any,
    done: Any,
) -> None:
    """One packed process: build the cell, warm up, wait for the start, time ``rounds``."""
    from benchlib.commands.bench.cells import bench_cell

    torch.set_num_threads(1)
    where = torch.device(device)
    cell = bench_cell(spec, Path(store), Path(split), where)
    cell.run_round(0)
    sync_device(where)
    ready.put(True)
    start.wait()
    for round_index in range(1, rounds + 1):
        cell.run_round(round_index)
    sync_device(where)
    done.put(time.perf_counter())


def _get(queue: Any, processes: list[Any], seconds: float) -> Any:
    """The next item of ``queue``; a packed process that died is an error at once, not after
    ``seconds`` of waiting for an item it will never put."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return queue.get(timeout=1.0)
        except Empty:
            failed = [p.exitcode for p in processes if p.exitcode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a packed cell process failed (exit codes {failed})") from None
            if time.monotonic() > deadline:
                raise


def packed_wall(
    specs: list[dict[str, Any]], store: Path, split: Path, device: torch.device, rounds: int
) -> float:
    """Seconds from a common start until the last of ``len(specs)`` concurrent cells has
    trained ``rounds`` rounds (each in its own process on ``device``)."""
    context = mp.get_context("spawn")
    ready, done, start = context.Queue(), context.Queue(), context.Event()
    processes = [
        context.Process(
            target=_packed_cell,
            args=(spec, str(store), str(split), str(device), rounds, ready, start, done),
        )
        for spec in specs
    ]
    for process in processes:
        process.start()
    try:
        for _ in processes:
            _get(ready, processes, 600)
        tick = time.perf_counter()
        start.set()
        finished = [_get(done, processes, 3600) for _ in processes]
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    failed = [p.exitcode for p in processes if p.exitcode != 0]
    if failed:
        raise RuntimeError(f"a packed cell process failed (exit codes {failed})")
    return max(finished) - tick


def measure_packing(
    make_spec: Callable[[str], dict[str, Any]],
    store: Path,
    split: Path,
    device: torch.device,
    cells: tuple[int, ...] = (1, 2, 4),
    rounds: int = 2,
    out: Print = print,
) -> dict[int, float]:
    """Effective seconds per cell-round with ``n`` cells sharing ``device``, for each ``n`` in
    ``cells``; ``make_spec(method)`` builds a cell spec."""
    effective = {}
    for count in cells:
        specs = [make_spec(METHODS[i % len(METHODS)]) for i in range(count)]
        wall = packed_wall(specs, store, split, device, rounds)
        effective[count] = wall / (count * rounds)
    base = effective[min(effective)]
    for count, seconds in effective.items():
        out(
            f"  {count} cell(s) per device: {seconds:7.3f} s per cell-round, "
            f"{base / seconds:4.2f}x the throughput of {min(effective)}"
        )
    return effective
