"""A synthetic store of any size (written chunk by chunk, never held in memory) and bench splits
over its rows, for the streaming and scale benchmarks."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.split import SPLIT_COLUMNS
from benchlib.data.store import INDEX_FILE, MANIFEST_FILE, PIXELS_FILE, load_store
from benchlib.data.store_checks import MANIFEST_CHECKSUM, manifest_checksum
from benchlib.primitives.errors import require
from benchlib.primitives.io import atomic_directory, sha256_file, write_json_atomic
from benchlib.primitives.seeding import numpy_rng

Print = Callable[[str], None]

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
        manifest[MANIFEST_CHECKSUM] = manifest_checksum(manifest)  # loads refuse unsigned ones
        write_json_atomic(tmp / MANIFEST_FILE, manifest)
    return out_dir


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
