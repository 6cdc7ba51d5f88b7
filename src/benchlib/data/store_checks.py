"""Validity checks of a prepared store, beyond its checksums.

Two levels. :func:`check_layout` runs on every load and stays cheap: the manifest's own fields
and checksum (a manifest without one is refused: it could have been edited unseen), each
``.npy`` header (dtype and shape, not the data) against the manifest, and the index table (row
count, unique sample ids, integer labels in ``0..num_classes-1``).
:func:`check_contents` reads the arrays (``benchlib verify-store``): float arrays finite,
segmentation masks within the class count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.io import sha256_json

MANIFEST_CHECKSUM = "manifest_sha256"  # sha256 of the manifest's other fields (canonical JSON)
SOURCE_KEY = "dataset_source"  # the registered source that prepared the store (provenance)
INPUT_ARRAYS = ("pixels", "features")
_CHUNK_ROWS = 4096


def _fail(store_dir: Path, problem: str) -> BenchlibError:
    return BenchlibError(f"store {store_dir}: {problem}; delete it and prepare it again")


def manifest_checksum(manifest: dict[str, Any]) -> str:
    """The checksum a manifest records of its other fields."""
    return sha256_json({k: v for k, v in manifest.items() if k != MANIFEST_CHECKSUM})


def check_manifest(manifest: object, store_dir: Path, known_arrays: dict[str, Any]) -> None:
    """The manifest's fields have the types a store needs, and it was not edited by hand."""
    if not isinstance(manifest, dict):
        raise _fail(store_dir, f"manifest.json holds a {type(manifest).__name__}, not an object")
    recorded = manifest.get(MANIFEST_CHECKSUM)
    if recorded is None:  # its fields (class count, shapes, sizes) could be edited unseen
        manifest_path = store_dir / "manifest.json"
        raise BenchlibError(
            f"store {store_dir}: manifest.json records no {MANIFEST_CHECKSUM} (prepared by an "
            f"older benchlib), so nothing it says can be trusted; prepare it again: "
            f"`rm -r {store_dir}`, then `snakemake {manifest_path}` with your config"
        )
    if recorded != manifest_checksum(manifest):
        raise _fail(store_dir, "manifest.json was changed after the store was written")
    num_classes = manifest.get("num_classes")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise _fail(store_dir, f"manifest num_classes is {num_classes!r}, not a positive integer")
    num_samples = manifest.get("num_samples")
    if num_samples is not None and (
        isinstance(num_samples, bool) or not isinstance(num_samples, int)
    ):
        raise _fail(store_dir, f"manifest num_samples is {num_samples!r}, not an integer")
    names = manifest.get("arrays", ["pixels"])
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _fail(store_dir, f"manifest arrays is {names!r}, not a list of array names")
    unknown = [n for n in names if n not in known_arrays]
    if unknown:
        raise _fail(
            store_dir, f"manifest names unknown arrays {unknown} (known: {', '.join(known_arrays)})"
        )
    if sum(n in INPUT_ARRAYS for n in names) != 1:
        raise _fail(store_dir, f"manifest arrays {names} need exactly one of pixels or features")
    for key in ("sizes", "files"):
        if not isinstance(manifest.get(key, {}), dict):
            raise _fail(store_dir, f"manifest {key} is not an object")
    if not isinstance(manifest.get("task", ""), str):
        raise _fail(store_dir, "manifest task is not a string")
    if not isinstance(manifest.get(SOURCE_KEY, ""), str):
        raise _fail(store_dir, f"manifest {SOURCE_KEY} is not a string")


def npy_header(path: Path) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a ``.npy`` file, read from its header only."""
    try:
        with open(path, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            reader = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _fortran, dtype = reader(handle)
    except (ValueError, SyntaxError, EOFError) as exc:
        raise BenchlibError(
            f"{path} is not a readable .npy array ({exc}); delete {path.parent} and prepare again"
        ) from exc
    return tuple(int(n) for n in shape), np.dtype(dtype)


def check_layout(
    store_dir: Path,
    manifest: dict[str, Any],
    index: pd.DataFrame,
    files: dict[str, str],
    dtypes: dict[str, Any],
    index_columns: list[str],
) -> None:
    """Cheap checks of every load: array headers and the index table against the manifest.

    ``files`` maps each array name to its file name, ``dtypes`` to its dtype.
    """
    rows = len(index)
    num_samples = manifest.get("num_samples", rows)
    if rows != num_samples:
        raise _fail(store_dir, f"index.csv has {rows} rows but the manifest records {num_samples}")
    missing = [c for c in index_columns if c not in index]
    if missing:
        raise _fail(store_dir, f"index.csv lacks the columns {missing}")
    duplicated = index["sample_id"][index["sample_id"].duplicated()]
    if len(duplicated):
        raise _fail(store_dir, f"index.csv lists the sample id {duplicated.iloc[0]!r} twice")
    labels = index["label"]
    if not pd.api.types.is_integer_dtype(labels):
        raise _fail(store_dir, f"index.csv has labels that are not integers (dtype {labels.dtype})")
    num_classes = int(manifest["num_classes"])
    outside = labels[(labels < 0) | (labels >= num_classes)]
    if len(outside):
        raise _fail(
            store_dir,
            f"index.csv has the label {int(outside.iloc[0])}, outside 0..{num_classes - 1} "
            f"(the manifest's num_classes is {num_classes})",
        )
    shapes = {}
    for name in manifest.get("arrays", ["pixels"]):
        path = store_dir / files[name]
        shape, dtype = npy_header(path)
        want = np.dtype(dtypes[name])
        if dtype != want:
            raise _fail(store_dir, f"{files[name]} holds {dtype} values, not {want}")
        if not shape or shape[0] != rows:
            raise _fail(
                store_dir,
                f"{files[name]} has shape {shape}: {shape[0] if shape else 0} rows for the "
                f"{rows} rows of index.csv",
            )
        shapes[name] = shape
    inputs = next(n for n in INPUT_ARRAYS if n in shapes)
    image_shape = manifest.get("image_shape")
    if image_shape is not None and list(shapes[inputs][1:]) != list(image_shape):
        raise _fail(
            store_dir,
            f"{files[inputs]} has rows of shape {list(shapes[inputs][1:])} but the manifest "
            f"records {image_shape}",
        )
    expected_ndim = {"pixels": (3, 4), "features": (2,), "masks": (3,), "targets": (2,)}
    for name, shape in shapes.items():
        if len(shape) not in expected_ndim.get(name, (len(shape),)):
            raise _fail(store_dir, f"{files[name]} has shape {shape}, the wrong number of axes")
    if "masks" in shapes and shapes["masks"][:3] != shapes[inputs][:3]:
        raise _fail(store_dir, f"masks {shapes['masks']} and images {shapes[inputs]} differ")


def check_contents(
    store_dir: Path, manifest: dict[str, Any], arrays: dict[str, np.ndarray]
) -> None:
    """The full check (reads every array): finite floats, masks within the class count."""
    num_classes = int(manifest["num_classes"])
    for name, array in arrays.items():
        for start in range(0, len(array), _CHUNK_ROWS):
            chunk = np.asarray(array[start : start + _CHUNK_ROWS])
            if chunk.dtype.kind == "f" and not np.isfinite(chunk).all():
                raise _fail(store_dir, f"{name} hold NaN/Inf (from row {start} on)")
            if name == "masks" and chunk.size and int(chunk.max()) >= num_classes:
                raise _fail(
                    store_dir,
                    f"masks hold the class {int(chunk.max())}, outside 0..{num_classes - 1}",
                )
