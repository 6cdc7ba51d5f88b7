"""Benchmarks (``benchlib bench``): engine overhead, and training streamed from a large store.

**Engine overhead** (:func:`run_benchmark`): engine rounds of fedavg (star) and lightyear (P2P)
on mnist5k against a bare ``forward -> loss -> backward -> step`` loop in the same process. The
bare reference trains the same clients on float tensors of their rows built once up front (no
FL logic, no per-batch gather or uint8 -> float conversion, no metrics) and evaluates the same
(model, validation set) pairs with one large batch under ``inference_mode``; so the ratio
engine / bare includes the engine's per-batch gather and conversion.

**Streaming** (:func:`run_stream_benchmark`): generates a synthetic store of ``size_gib`` GiB
(96x96x3 uint8 patches, written chunk by chunk: never held in memory), trains a fixed number of
steps of a small FEMNIST CNN with ``data_mode: stream`` on clients whose rows are spread over
the whole file (the file's page cache is dropped first, where the kernel allows), and the same
number of steps with ``data_mode: resident`` on a subset that fits in memory. A background
thread samples the process's anonymous resident memory (``RssAnon``; the page cache of the
memory-mapped store counts as ``RssFile``, not anon) every 20 ms. The streamed round runs twice,
each on a cold page cache: with ``training.prefetch: 0`` (every step gathers its own batch) and
with batches gathered ahead by background threads (:mod:`benchlib.fl.prefetch`).

Both print tables; no timing is asserted anywhere.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import io
import json
import math
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from benchlib.bench_device import GpuUtilisation, sync_device
from benchlib.bench_flower import FlowerWorkload, flower_missing, max_difference, run_flower_cell
from benchlib.data.registry import get_dataset
from benchlib.data.split import SPLIT_COLUMNS, SplitSpec, make_split, write_split
from benchlib.data.store import INDEX_FILE, MANIFEST_FILE, PIXELS_FILE, load_store
from benchlib.errors import require
from benchlib.fl.engine import Cell
from benchlib.fl.optim import build_optimizer
from benchlib.io import atomic_directory, sha256_file, write_json_atomic
from benchlib.seeding import numpy_rng
from benchlib.settings import TrainingSettings

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


# ------------------------------------------------------------------------- engine overhead
def _spec(method: str, clients: int, **training: Any) -> dict[str, Any]:
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


class _BareData:
    """The reference's data: float tensors of each client's train and val rows, built once."""

    def __init__(self, cell: Cell) -> None:
        self.train = [cell.source.batch(c.rows["train"]) for c in cell.clients]
        self.val = [cell.source.batch(c.rows["val"])[0] for c in cell.clients]


def _bare_train(
    cell: Cell, data: _BareData, models: list[torch.nn.Module], optimizers: list
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
def _bare_eval(data: _BareData, models: list[torch.nn.Module], pairs: str) -> None:
    for model in models:
        model.eval()
    if pairs == "all":  # P2P: every client scores every model on its own validation set
        for val_x in data.val:
            for model in models:
                model(val_x)
    else:  # star: one global model scored on each validation set
        for val_x in data.val:
            models[0](val_x)


def _median_times(funcs: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
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


def _bench_data(
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
        store, split, train_size = _bench_data(Path(tmp), store, clients, samples)
        out(
            f"engine overhead: {clients} clients x ~{train_size} train samples, FEMNIST CNN, "
            f"{torch.get_num_threads()} threads, median of {repeats} after a warm-up"
        )
        out(f"{'method':<10} {'phase':<8} {'engine s':>9} {'bare s':>9} {'ratio':>6}")
        for method, pairs in (("fedavg", "global"), ("lightyear", "all")):
            cell = Cell(_spec(method, clients), store, split, device=torch.device("cpu"))
            data = _BareData(cell)
            models = [copy.deepcopy(m) for m in cell.models]
            optimizers = [build_optimizer(list(m.parameters()), SETTINGS) for m in models]
            state = {"round": 0}

            def engine_round(cell: Cell = cell, state: dict = state) -> None:
                cell.run_round(state["round"] % rounds)
                state["round"] += 1

            def engine_train(cell: Cell = cell) -> None:
                cell._train_all(0, cell.federation)

            median = _median_times(
                {
                    "bare_train": lambda m=models, o=optimizers, c=cell, d=data: _bare_train(
                        c, d, m, o
                    ),
                    "train": engine_train,
                    "bare_eval": lambda m=models, d=data, p=pairs: _bare_eval(d, m, p),
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


def run_flower_comparison(
    rounds: int = 6,
    clients: int = 8,
    samples: int = 400,
    store: Path | None = None,
    out: Print = print,
) -> dict[str, float] | None:
    """Time a ``rounds``-round FedAvg cell in the engine and in Flower's simulation engine.

    Both train the same workload from the same weights (:mod:`benchlib.bench_flower`); the
    printed weight difference shows they did the same work. Returns Flower / engine ratios, or
    None (with a message) when Flower is not installed.
    """
    missing = flower_missing()
    if missing is not None:
        out(missing)
        return None
    cpus = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        store, split, train_size = _bench_data(Path(tmp), store, clients, samples)
        spec = _spec("fedavg", clients, persist_optimizer=False)
        workload = FlowerWorkload.of_cell(Cell(spec, store, split, device=torch.device("cpu")))
        cell = Cell(spec, store, split, device=torch.device("cpu"))
        tick = time.perf_counter()
        for round_index in range(rounds):
            cell.run_round(round_index)
        engine = time.perf_counter() - tick
        engine_state = copy.deepcopy(cell.scratch)
        cell.layout.load(engine_state, cell.global_vector)
        flower = run_flower_cell(workload, rounds, cpus)
    difference = max_difference(engine_state.state_dict(), flower.final_state)
    out(
        f"\nFedAvg cell of {rounds} rounds: {clients} clients x ~{train_size} train samples, "
        f"{cpus} cores (Flower: {clients} virtual clients on Ray, 1 core and 1 thread each)"
    )
    out(f"{'run':<32} {'seconds':>8} {'x engine':>9}")
    rows = {
        "engine (benchlib)": engine,
        "Flower simulation, rounds": flower.rounds_s,
        "Flower simulation, with start-up": flower.total_s,
    }
    for name, seconds in rows.items():
        out(f"{name:<32} {seconds:>8.2f} {seconds / engine:>9.2f}")
    out(f"final global models: max |engine - Flower| = {difference:.2e} (same workload)")
    return {"rounds": flower.rounds_s / engine, "total": flower.total_s / engine}


# ------------------------------------------------------------------------- memory sampling
def rss_anon_bytes(field: str = "RssAnon") -> int:
    """This process's resident memory of one kind (``RssAnon``, ``RssFile``) from /proc."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024  # the kernel reports kB
    raise OSError(f"/proc/self/status has no {field} line (Linux >= 4.5 needed)")


def disk_read_bytes() -> int:
    """Bytes this process has caused to be read from storage (page-cache misses included)."""
    try:
        with open("/proc/self/io") as handle:
            for line in handle:
                if line.startswith("read_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1  # not available (no task I/O accounting)


class PeakRss:
    """Samples RssAnon and RssFile in a background thread; ``peak_anon`` / ``peak_file`` bytes.

    Use as a context manager around the measured code.
    """

    def __init__(self, interval: float = 0.02) -> None:
        self.interval = interval
        self.peak_anon = 0
        self.peak_file = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def sample(self) -> None:
        self.peak_anon = max(self.peak_anon, rss_anon_bytes("RssAnon"))
        self.peak_file = max(self.peak_file, rss_anon_bytes("RssFile"))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> PeakRss:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


# ------------------------------------------------------------------------ synthetic store
STREAM_DATASET = "bench_stream"
STREAM_SHAPE = (96, 96, 3)
STREAM_CLASSES = 10
CHUNK_BYTES = 256 * 1024**2


def _synthetic_params(
    rows: int, shape: tuple[int, ...], seed: int, chunk_rows: int
) -> dict[str, Any]:
    return {
        "rows": rows,
        "shape": list(shape),
        "classes": STREAM_CLASSES,
        "seed": seed,
        "chunk_rows": chunk_rows,
    }


def write_synthetic_store(
    out_dir: str | Path,
    rows: int,
    shape: tuple[int, ...] = STREAM_SHAPE,
    seed: int = 0,
    chunk_bytes: int = CHUNK_BYTES,
    out: Print = print,
) -> Path:
    """Write a store of ``rows`` random uint8 images without holding it in memory.

    Same layout as :func:`benchlib.data.store.write_store` (index.csv, pixels.npy, manifest.json
    with sha256 and sizes; written in a sibling temp dir renamed into place). pixels.npy is
    written chunk by chunk and hashed on the fly; each image is seeded noise with a
    class-coloured 8x8 corner (label = a seeded class). Reused when ``out_dir`` already holds a
    store made with the same parameters.
    """
    out_dir = Path(out_dir)
    row_bytes = math.prod(shape)
    chunk_rows = max(1, chunk_bytes // row_bytes)
    params = _synthetic_params(rows, shape, seed, chunk_rows)
    manifest_path = out_dir / MANIFEST_FILE
    if manifest_path.is_file() and json.loads(manifest_path.read_text()).get("synthetic") == params:
        load_store(out_dir)  # sizes match the manifest
        out(f"reusing the store in {out_dir}")
        return out_dir
    labels = numpy_rng(seed, "bench/labels").integers(0, STREAM_CLASSES, rows)
    with atomic_directory(out_dir) as tmp:
        index = pd.DataFrame(
            {
                "sample_id": [f"s{i:09d}" for i in range(rows)],
                "label": labels,
                "group": (np.arange(rows) % 64).astype(str),
                "source_split": "",
            }
        )
        index.to_csv(tmp / INDEX_FILE, index=False)
        del index
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(
            header,
            {
                "descr": np.lib.format.dtype_to_descr(np.dtype(np.uint8)),
                "fortran_order": False,
                "shape": (rows, *shape),
            },
        )
        digest = hashlib.sha256(header.getvalue())
        total = rows * row_bytes
        started, reported = time.perf_counter(), 0
        with open(tmp / PIXELS_FILE, "wb") as handle:
            handle.write(header.getvalue())
            for number, first in enumerate(range(0, rows, chunk_rows)):
                count = min(chunk_rows, rows - first)
                rng = numpy_rng(seed, "bench/pixels", number)
                chunk = rng.integers(0, 256, (count, *shape), dtype=np.uint8)
                marker = (labels[first : first + count] * 25).reshape(-1, *[1] * len(shape))
                chunk[:, :8, :8] = marker
                data = memoryview(chunk).cast("B")
                digest.update(data)
                handle.write(data)
                done = (first + count) * row_bytes
                if done - reported >= 1024**3 or done == total:
                    reported = done
                    elapsed = time.perf_counter() - started
                    out(
                        f"  generated {done / 1024**3:6.2f} / {total / 1024**3:.2f} GiB "
                        f"({done / 1024**2 / max(elapsed, 1e-9):.0f} MiB/s)"
                    )
            handle.flush()
            os.fsync(handle.fileno())
        files = [INDEX_FILE, PIXELS_FILE]
        manifest = {
            "dataset": STREAM_DATASET,
            "task": "classification",
            "num_samples": rows,
            "num_classes": STREAM_CLASSES,
            "image_shape": list(shape),
            "arrays": ["pixels"],
            "sources": [],
            "files": {INDEX_FILE: sha256_file(tmp / INDEX_FILE), PIXELS_FILE: digest.hexdigest()},
            "sizes": {name: (tmp / name).stat().st_size for name in files},
            "synthetic": params,
        }
        write_json_atomic(tmp / MANIFEST_FILE, manifest)
    return out_dir


def drop_file_cache(path: Path) -> bool:
    """Ask the kernel to evict ``path``'s clean pages from the page cache (no root needed)."""
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def spread_rows(total: int, clients: int, per_client: int, seed: int = 0) -> list[np.ndarray]:
    """Per client, ``per_client`` distinct store rows drawn at random from the whole store."""
    require(
        clients * per_client <= total, f"the store has {total} rows, {clients * per_client} needed"
    )
    chosen = numpy_rng(seed, "bench/rows").choice(total, clients * per_client, replace=False)
    return [chosen[c::clients] for c in range(clients)]


def write_bench_split(
    path: Path, sample_ids: np.ndarray, rows: list[np.ndarray], train: int, evaluate: int
) -> None:
    """A split CSV: client c trains on ``rows[c][:train]`` and validates/tests on the next rows."""
    parts = []
    for client, own in enumerate(rows):
        subsets = {
            "train": own[:train],
            "val": own[train : train + evaluate],
            "test": own[train + evaluate : train + 2 * evaluate],
        }
        for subset, chosen in subsets.items():
            ids = np.sort(sample_ids[chosen])
            parts.append(pd.DataFrame({"sample_id": ids, "client": client, "subset": subset}))
    table = pd.concat(parts, ignore_index=True)
    table["group"] = "0"
    table[SPLIT_COLUMNS].to_csv(path, index=False)


def _stream_spec(
    clients: int, batch: int, epochs: int, mode: str, model: dict, prefetch: int = 0
) -> dict[str, Any]:
    return {
        "experiment": "bench_stream",
        "dataset": STREAM_DATASET,
        "method_id": "fedavg",
        "method": "fedavg",
        "malfunction": "none",
        "k": 0,
        "seed": 0,
        "clients": clients,
        "model": {"name": "femnist_cnn", "params": dict(model)},
        "training": {
            "optimizer": "adam",
            "lr": 1e-3,
            "batch_size": batch,
            "local_epochs": epochs,
            "rounds": 1,
            "data_mode": mode,
            "prefetch": prefetch,
        },
    }


STREAM_MODEL = {"conv1": 4, "conv2": 8, "hidden": 32}
CPU = torch.device("cpu")


def _measure(
    spec: dict[str, Any],
    store: Path,
    split: Path,
    samples: int,
    out: Print,
    device: torch.device = CPU,
) -> dict[str, Any]:
    """Build a cell and time one round (its local training = the fixed steps) under PeakRss
    (and, on a GPU, while sampling its utilisation).

    The store's page cache is dropped first: the set-up (resident) or the round (stream) reads
    from disk.
    """
    gc.collect()
    drop_file_cache(store / PIXELS_FILE)
    with PeakRss() as peak:
        tick = time.perf_counter()
        cell = Cell(spec, store, split, device=device)
        sync_device(device)
        setup = time.perf_counter() - tick
        require(cell.source.mode == spec["training"]["data_mode"], "data mode not honoured")
        read_before = disk_read_bytes()
        with GpuUtilisation(device) as gpu:
            tick = time.perf_counter()
            cell.run_round(0)
            sync_device(device)
            seconds = time.perf_counter() - tick
        read = disk_read_bytes() - read_before if read_before >= 0 else -1
    del cell
    gc.collect()
    row = {
        "mode": spec["training"]["data_mode"],
        "prefetch": spec["training"]["prefetch"],
        "samples": samples,
        "setup_s": setup,
        "seconds": seconds,
        "samples_per_s": samples / seconds,
        "peak_rss_anon_mb": peak.peak_anon / 1024**2,
        "peak_rss_file_mb": peak.peak_file / 1024**2,
        "disk_read_mb": read / 1024**2 if read >= 0 else float("nan"),
        "gpu_busy_pct": float("nan") if gpu.mean is None else gpu.mean,
    }
    busy = "" if gpu.mean is None else f", GPU busy {gpu.mean:.0f} %"
    out(
        f"  {row['mode']} (prefetch {row['prefetch']}): set-up {setup:.1f} s, {samples} samples "
        f"in {seconds:.1f} s (peak RssAnon {row['peak_rss_anon_mb']:.0f} MB, disk read "
        f"{row['disk_read_mb']:.0f} MB{busy})"
    )
    return row


def run_stream_benchmark(
    size_gib: float = 8.0,
    steps: int = 400,
    batch_size: int = 32,
    clients: int = 4,
    resident_epochs: int = 4,
    store_dir: Path | None = None,
    shape: tuple[int, ...] = STREAM_SHAPE,
    model: dict[str, Any] | None = None,
    prefetch: int = 2,
    out: Print = print,
    device: torch.device = CPU,
) -> list[dict[str, Any]]:
    """Stream vs resident training of ``steps`` steps on a generated store of ``size_gib`` GiB.

    Stream: each client trains one epoch over ``steps / clients`` batches of rows spread over the
    whole store. Resident: the same clients train ``resident_epochs`` epochs over the first
    ``1 / resident_epochs`` of those rows, held in memory: the same steps and samples. ``steps``
    is rounded up to a multiple of ``clients * resident_epochs``. ``store_dir``: where the store
    is generated (kept, and reused by a later run with the same size); default a temporary
    folder removed at the end. Returns one row per mode (stream first), each timed on a cold
    page cache. Stream runs twice: each step gathering its own batch (``training.prefetch: 0``,
    the row's numbers) and with ``prefetch`` batches gathered ahead by background threads (the
    row's ``prefetch_*`` numbers; ``prefetch_speedup`` = its samples/s over the former's).
    ``device``: where the cells train (on a GPU each row also gets ``gpu_busy_pct``, the mean
    NVML utilisation during its round, NaN where NVML does not answer).
    """
    require(prefetch >= 1, f"the prefetch depth compared must be >= 1, got {prefetch}")
    require(size_gib > 0 and steps >= 1 and batch_size >= 1, "size, steps and batch must be > 0")
    require(clients >= 2 and resident_epochs >= 1, "need >= 2 clients and >= 1 resident epoch")
    model = dict(STREAM_MODEL if model is None else model)
    block = clients * resident_epochs
    steps = -(-steps // block) * block
    per_client = steps // clients * batch_size  # stream train rows per client
    evaluate = batch_size  # val and test rows per client: one batch each
    row_bytes = math.prod(shape)
    rows = max(math.ceil(size_gib * 1024**3 / row_bytes), clients * (per_client + 2 * evaluate))
    temporary = store_dir is None
    work = Path(tempfile.mkdtemp(prefix="benchlib-stream-")) if temporary else Path(store_dir)
    try:
        store = work / "store"
        out(
            f"stream benchmark: store of {rows} x {'x'.join(map(str, shape))} uint8 "
            f"({rows * row_bytes / 1e9:.2f} GB = {rows * row_bytes / 1024**3:.2f} GiB) in {store}"
        )
        write_synthetic_store(store, rows, shape, out=out)
        data = load_store(store)
        sample_ids = data.index["sample_id"].to_numpy()
        file_size = (store / PIXELS_FILE).stat().st_size
        del data
        spread = spread_rows(rows, clients, per_client + 2 * evaluate)
        stream_split, resident_split = work / "split_stream.csv", work / "split_resident.csv"
        write_bench_split(stream_split, sample_ids, spread, per_client, evaluate)
        subset = per_client // resident_epochs
        resident_rows = [np.concatenate([r[:subset], r[per_client:]]) for r in spread]
        write_bench_split(resident_split, sample_ids, resident_rows, subset, evaluate)
        del sample_ids
        samples = steps * batch_size
        out(
            f"{clients} clients, {steps} steps of batch {batch_size} "
            f"(FEMNIST CNN {model}) on {device}, {torch.get_num_threads()} threads; "
            f"stream: {clients * per_client} rows spread over the store, 1 epoch; resident: "
            f"{clients * subset} rows, {resident_epochs} epochs"
        )
        out(
            "before each mode the page cache of pixels.npy is dropped (posix_fadvise "
            "DONTNEED): its reads come from disk"
        )
        results = [
            _measure(
                _stream_spec(clients, batch_size, 1, "stream", model),
                store,
                stream_split,
                samples,
                out,
                device,
            ),
            _measure(
                _stream_spec(clients, batch_size, resident_epochs, "resident", model),
                store,
                resident_split,
                samples,
                out,
                device,
            ),
        ]
        ahead = _measure(
            _stream_spec(clients, batch_size, 1, "stream", model, prefetch),
            store,
            stream_split,
            samples,
            out,
            device,
        )
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
    resident_speed = results[1]["samples_per_s"]
    for row in results:
        row["ratio"] = row["samples_per_s"] / resident_speed
        row["store_bytes"] = file_size
        row["prefetch_seconds"] = row["prefetch_samples_per_s"] = float("nan")
        row["prefetch_gpu_busy_pct"] = float("nan")
        row["prefetch_speedup"] = float("nan")
    results[0]["prefetch_seconds"] = ahead["seconds"]
    results[0]["prefetch_samples_per_s"] = ahead["samples_per_s"]
    results[0]["prefetch_speedup"] = ahead["samples_per_s"] / results[0]["samples_per_s"]
    results[0]["prefetch_gpu_busy_pct"] = ahead["gpu_busy_pct"]
    fetched = f"prefetch {prefetch} samples/s"
    out(
        f"{'mode':<9} {'samples':>8} {'seconds':>8} {'samples/s':>10} "
        f"{'peak RssAnon MB':>16} {'peak RssFile MB':>16} {'disk read MB':>13} {'ratio':>6} "
        f"{fetched:>{len(fetched)}} {'speedup':>8}"
    )
    for row in results:
        streamed = row["mode"] == "stream"
        out(
            f"{row['mode']:<9} {row['samples']:>8} {row['seconds']:>8.1f} "
            f"{row['samples_per_s']:>10.1f} {row['peak_rss_anon_mb']:>16.0f} "
            f"{row['peak_rss_file_mb']:>16.0f} {row['disk_read_mb']:>13.0f} {row['ratio']:>6.2f} "
            + (
                f"{row['prefetch_samples_per_s']:>{len(fetched)}.1f} "
                f"{row['prefetch_speedup']:>8.2f}"
                if streamed
                else f"{'-':>{len(fetched)}} {'-':>8}"
            )
        )
    out(
        "ratio = samples/s / resident samples/s (same run); RssFile: mapped page cache and "
        "libraries (not anonymous); disk read: bytes read from storage during the timed round; "
        f"the stream columns: training.prefetch 0 (each step gathers its batch); prefetch "
        f"{prefetch}: {prefetch} batches gathered ahead by background threads, speedup = its "
        "samples/s / the stream row's"
    )
    if device.type == "cuda":
        out(
            "GPU busy (NVML, mean over the round): "
            f"stream {results[0]['gpu_busy_pct']:.0f} %, stream with prefetch {prefetch} "
            f"{ahead['gpu_busy_pct']:.0f} %, resident {results[1]['gpu_busy_pct']:.0f} %"
        )
    return results
