"""The prepared store: one on-disk format for every dataset.

A store directory holds:

- ``index.csv``: one row per sample: ``sample_id`` (unique string), ``label`` (int; the class for
  classification, 0 where a task has no sample-level class), ``group`` (natural group such as
  writer, hospital, patient or domain), ``source_split`` (split given by the source, e.g. LEAF's
  train/test, or empty), and optionally ``shard`` (the source file a sample came from);
- the sample arrays, row i = index row i, saved as ``.npy`` and memory-mapped on load:
  ``pixels.npy`` (uint8 images ``[N, H, W]`` or ``[N, H, W, C]``) or ``features.npy`` (float32
  tabular rows ``[N, F]``); ``masks.npy`` (uint8 ``[N, H, W]`` class per pixel, segmentation);
  ``targets.npy`` (float32 ``[N, T]``, regression);
- ``manifest.json``: dataset name, task, class count, input shape, the sha256 of each source file,
  the sha256 and byte size of every store file, and ``dataset_source``: the registered dataset
  source that prepared the store (added by ``DatasetSource.prepare``, :func:`record_source`;
  a cell's provenance names the plugin behind it; stores written before it was recorded lack it).

The sha256 of the store files is computed once, when the store is written; a cell checks that the
files exist with the sizes the manifest records, re-hashes index.csv (small; it holds the labels)
and checks the store's layout (:mod:`benchlib.data.store_checks`: array headers, row counts,
labels against the manifest), and ``benchlib verify-store`` (or ``load_store(verify="full")``)
re-hashes everything and reads every array. Nothing downstream knows where the data
came from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.store_checks import (
    MANIFEST_CHECKSUM,
    SOURCE_KEY,
    check_contents,
    check_layout,
    check_manifest,
    manifest_checksum,
)
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import atomic_directory, loads_json, sha256_file, write_json_atomic

INDEX_FILE = "index.csv"
PIXELS_FILE = "pixels.npy"
MANIFEST_FILE = "manifest.json"
# array name -> (file, dtype); which of them a store holds depends on its task
ARRAYS = {
    "pixels": (PIXELS_FILE, np.uint8),
    "features": ("features.npy", np.float32),
    "masks": ("masks.npy", np.uint8),
    "targets": ("targets.npy", np.float32),
}
INDEX_COLUMNS = ["sample_id", "label", "group", "source_split"]
OPTIONAL_INDEX_COLUMNS = ["shard"]


@dataclass(frozen=True)
class PreparedData:
    """A loaded store: the index table, the memory-mapped arrays and the manifest."""

    index: pd.DataFrame
    arrays: dict[str, np.ndarray]
    manifest: dict[str, Any]

    @property
    def num_classes(self) -> int:
        return int(self.manifest["num_classes"])

    @property
    def task(self) -> str:
        return str(self.manifest.get("task", "classification"))

    @property
    def dataset_source(self) -> str | None:
        """The dataset source that prepared the store (None: the manifest does not say)."""
        return self.manifest.get(SOURCE_KEY)

    @property
    def pixels(self) -> np.ndarray:
        """The uint8 images (image stores only)."""
        return self.arrays["pixels"]

    @property
    def inputs(self) -> np.ndarray:
        """The model inputs: images (uint8) or tabular features (float32)."""
        return self.arrays["pixels"] if "pixels" in self.arrays else self.arrays["features"]


def write_store(
    out_dir: str | Path,
    *,
    dataset: str,
    index: pd.DataFrame,
    pixels: np.ndarray | None = None,
    num_classes: int,
    sources: list[dict[str, str]],
    extra: dict[str, Any] | None = None,
    task: str = "classification",
    features: np.ndarray | None = None,
    masks: np.ndarray | None = None,
    targets: np.ndarray | None = None,
) -> None:
    """Write a store to ``out_dir`` atomically (a sibling temp dir renamed into place).

    Give ``pixels`` (uint8 images) or ``features`` (float32 rows) as inputs, plus ``masks``
    (segmentation) or ``targets`` (regression). ``sources`` lists ``{"name": ..., "sha256":
    ...}`` for every raw file the store came from. The manifest is written last, so a directory
    without one is never a finished store.
    """
    given = {
        name: array
        for name, array in (
            ("pixels", pixels),
            ("features", features),
            ("masks", masks),
            ("targets", targets),
        )
        if array is not None
    }
    require(
        ("pixels" in given) != ("features" in given),
        "a store needs exactly one of pixels or features (a source bug)",
    )
    inputs = given.get("pixels", given.get("features"))
    assert inputs is not None
    out_dir = Path(out_dir)
    index = index.reset_index(drop=True).copy()
    if "source_split" not in index:
        index["source_split"] = ""
    missing = [c for c in INDEX_COLUMNS if c not in index]
    require(
        not missing, f"store index lacks columns {missing}; this is a bug in the dataset source"
    )
    for name, array in given.items():
        dtype = ARRAYS[name][1]
        require(len(array) == len(index), f"store index and {name} differ in length (a source bug)")
        require(array.dtype == dtype, f"store {name} must be {np.dtype(dtype)} (a source bug)")
        if array.dtype.kind == "f":
            require(bool(np.isfinite(array).all()), f"store {name} hold NaN/Inf (a source bug)")
    if "masks" in given:
        require(
            given["masks"].shape[:3] == inputs.shape[:3],
            "store masks and images differ in shape (a source bug)",
        )
    require(index["sample_id"].is_unique, "store sample ids are not unique (a source bug)")
    labels = index["label"].to_numpy()
    require(
        bool(((labels >= 0) & (labels < num_classes)).all()),
        f"labels outside 0..{num_classes - 1} in dataset {dataset}",
    )
    with atomic_directory(out_dir) as tmp:
        columns = INDEX_COLUMNS + [c for c in OPTIONAL_INDEX_COLUMNS if c in index]
        index[columns].to_csv(tmp / INDEX_FILE, index=False)
        files = [INDEX_FILE]
        for name, array in given.items():
            files.append(ARRAYS[name][0])
            np.save(tmp / ARRAYS[name][0], array, allow_pickle=False)
        manifest = {
            "dataset": dataset,
            "task": task,
            "num_samples": len(index),
            "num_classes": int(num_classes),
            "image_shape": list(inputs.shape[1:]),
            "arrays": sorted(given),
            "sources": sources,
            "files": {name: sha256_file(tmp / name) for name in files},
            "sizes": {name: (tmp / name).stat().st_size for name in files},
            **(extra or {}),
        }
        manifest[MANIFEST_CHECKSUM] = manifest_checksum(manifest)
        write_json_atomic(tmp / MANIFEST_FILE, manifest)


def record_source(store_dir: str | Path, source: str) -> None:
    """Record in a written store's manifest the dataset source that prepared it (its checksum
    renewed), whatever the source's build function wrote there."""
    path = Path(store_dir) / MANIFEST_FILE
    require(
        path.is_file(), f"dataset source {source} wrote no {path} (a bug in the dataset source)"
    )
    manifest = loads_json(path.read_text(encoding="utf-8"))
    check_manifest(manifest, Path(store_dir), ARRAYS)  # never re-sign an edited manifest
    manifest[SOURCE_KEY] = source
    manifest[MANIFEST_CHECKSUM] = manifest_checksum(manifest)
    write_json_atomic(path, manifest)


def load_store(store_dir: str | Path, *, verify: str = "quick") -> PreparedData:
    """Load a store, checking that it is complete and matches its manifest.

    ``verify``: ``quick`` (default) checks every file's byte size against the manifest (stores
    written before sizes were recorded are hashed instead); ``full`` re-hashes every file;
    ``none`` only checks that the files exist.
    """
    require(verify in ("quick", "full", "none"), f"unknown store check {verify!r}")
    store_dir = Path(store_dir)
    manifest_path = store_dir / MANIFEST_FILE
    require(
        manifest_path.is_file(),
        f"prepared data not found: {manifest_path} is missing; run the prepare step "
        f"(e.g. `snakemake {manifest_path}`) first",
    )
    try:
        manifest = loads_json(manifest_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise BenchlibError(
            f"{manifest_path} is not valid JSON ({reason}); delete {store_dir} and prepare again"
        ) from exc
    check_manifest(manifest, store_dir, ARRAYS)
    names = manifest.get("arrays", ["pixels"])
    sizes = manifest.get("sizes", {})
    checksums = manifest.get("files", {})
    for file in [INDEX_FILE, *(ARRAYS[name][0] for name in names)]:
        path = store_dir / file
        require(path.is_file(), f"{path} is missing; delete {store_dir} and prepare again")
        if verify == "none":
            continue
        if file in sizes:
            actual_size = path.stat().st_size
            require(
                actual_size == sizes[file],
                f"{path} has {actual_size} bytes but its manifest records {sizes[file]}; the "
                f"store is corrupted or incomplete: delete {store_dir} and prepare again",
            )
        # index.csv is small and holds the labels: it is hashed on every load
        if verify == "full" or file == INDEX_FILE or file not in sizes:
            require(
                file in checksums,
                f"{manifest_path} records neither the size nor the sha256 of {file}; delete "
                f"{store_dir} and prepare again",
            )
            actual = sha256_file(path)
            require(
                actual == checksums[file],
                f"{path} does not match its manifest checksum (expected {checksums[file]}, got "
                f"{actual}); the store is corrupted: delete {store_dir} and prepare again",
            )
    index = _read_index(store_dir / INDEX_FILE)
    check_layout(
        store_dir,
        manifest,
        index,
        {name: ARRAYS[name][0] for name in ARRAYS},
        {name: ARRAYS[name][1] for name in ARRAYS},
        INDEX_COLUMNS,
    )
    # Memory-mapped: a cell reads only its clients' rows of a large store.
    arrays = {
        name: np.load(store_dir / ARRAYS[name][0], mmap_mode="r", allow_pickle=False)
        for name in names
    }
    if verify == "full":
        check_contents(store_dir, manifest, arrays)
    return PreparedData(index=index, arrays=arrays, manifest=manifest)


def _read_index(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(
            path,
            dtype={"sample_id": str, "group": str, "source_split": str, "shard": str},
            keep_default_na=False,
        )
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise BenchlibError(
            f"{path} is not a readable store index ({exc}); delete {path.parent} and prepare again"
        ) from exc
