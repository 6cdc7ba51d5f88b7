"""``mnist5k_inverted``: benchlib's embedded MNIST images with inverted grey levels.

A dataset source builds a prepared store; this one prepares benchlib's ``mnist5k`` into a
scratch folder, inverts every pixel (255 - x) and writes its own store. Torch-free.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from benchlib.data.registry import get_dataset
from benchlib.data.store import load_store, write_store


def prepare_inverted(out_dir: Path, params: dict[str, Any]) -> None:
    """Write the inverted store into ``out_dir``."""
    with tempfile.TemporaryDirectory() as scratch:
        original = Path(scratch) / "mnist5k"
        get_dataset("mnist5k").prepare(original, {})
        store = load_store(original)
        write_store(
            out_dir,
            dataset="mnist5k_inverted",
            index=store.index,
            pixels=255 - store.arrays["pixels"],
            num_classes=10,
            sources=store.manifest["sources"],
        )
