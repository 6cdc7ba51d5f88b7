"""``benchlib bench stream``: training streamed from a large store against resident training.

Generates a synthetic store of ``size_gib`` GiB (96x96x3 uint8 patches, written chunk by chunk:
never held in memory), trains a fixed number of steps of a small FEMNIST CNN with ``data_mode:
stream`` on clients whose rows are spread over the whole file (the file's page cache is dropped
first, where the kernel allows), and the same number of steps with ``data_mode: resident`` on a
subset that fits in memory. A background thread samples the process's anonymous resident memory
(``RssAnon``; the page cache of the memory-mapped store counts as ``RssFile``, not anon) every
20 ms. The streamed round runs twice, each on a cold page cache: with ``training.prefetch: 0``
(every step gathers its own batch) and with batches gathered ahead by background threads
(:mod:`benchlib.fl.prefetch`). Prints a table; no timing is asserted anywhere.
"""

from __future__ import annotations

import gc
import math
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchlib.commands.bench.cells import bench_cell
from benchlib.commands.bench.device import GpuUtilisation, sync_device
from benchlib.commands.bench.memory import PeakRss, disk_read_bytes, drop_file_cache
from benchlib.commands.bench.synthetic import (
    STREAM_DATASET,
    STREAM_SHAPE,
    spread_rows,
    write_bench_split,
    write_synthetic_store,
)
from benchlib.data.store import PIXELS_FILE, load_store
from benchlib.primitives.errors import require

Print = Callable[[str], None]


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
        cell = bench_cell(spec, store, split, device=device)
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
