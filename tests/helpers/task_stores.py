"""Generated stores of every task (segmentation, regression) for engine and workflow tests.

Both are small and deterministic: the segmentation images show a bright square on noise (the mask
is the square), the regression rows have a linear target plus noise; each has a `group` column
so that a `groups` partition gives every client its own share.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store, write_store
from helpers.specs import filled_spec


def _index(n: int, groups: int, prefix: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sample_id": [f"{prefix}{i:04d}" for i in range(n)],
            "label": 0,
            "group": [f"g{i % groups}" for i in range(n)],
            "source_split": "",
        }
    )


def segmentation_store(out: Path, n: int = 60, size: int = 32, groups: int = 4) -> Path:
    """Grey images with one bright square each; masks: 1 inside the square."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 60, size=(n, size, size), dtype=np.uint8)
    masks = np.zeros((n, size, size), dtype=np.uint8)
    for i in range(n):
        side = int(rng.integers(4, size // 2))
        top, left = rng.integers(0, size - side, size=2)
        masks[i, top : top + side, left : left + side] = 1
        images[i][masks[i] == 1] = rng.integers(180, 255, size=int(masks[i].sum()))
    write_store(
        out, dataset="squares", index=_index(n, groups, "sq"), pixels=images, masks=masks,
        num_classes=2, sources=[], task="segmentation",
    )  # fmt: skip
    return out


def regression_store(out: Path, n: int = 120, features: int = 4, groups: int = 4) -> Path:
    """Float rows x ~ N(0, 1); target = x . w + 0.05 noise, w fixed."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(n, features)).astype(np.float32)
    w = np.linspace(-1.0, 1.0, features, dtype=np.float32)
    y = (x @ w + 0.05 * rng.normal(size=n)).astype(np.float32)[:, None]
    write_store(
        out, dataset="linear", index=_index(n, groups, "row"), features=x, targets=y,
        num_classes=1, sources=[], task="regression",
    )  # fmt: skip
    return out


def groups_split(store: Path, out: Path, clients: int = 4) -> Path:
    """One group per client; 20% val and 20% test per client."""
    spec = SplitSpec(clients, "groups", {}, 0.2, 0.2, seed=0)
    write_split(make_split(load_store(store), spec), out)
    return out


def task_cell_spec(task: str, method: str = "fedavg", **overrides) -> dict:
    """A 2-round cell spec (JSON form, every default filled) for a generated store of
    ``task``."""
    model = (
        {"name": "small_unet", "params": {"features": [4, 4, 8, 8, 16, 4]}}
        if task == "segmentation"
        else {"name": "mlp", "params": {"hidden": [16]}}
    )
    spec = {
        "experiment": f"tiny_{task}",
        "dataset": task,
        "method_id": method,
        "method": method,
        "method_params": {"tau": 0.6} if method == "lightyear" else {},
        "malfunction": "none",
        "k": 0,
        "seed": 0,
        "clients": 4,
        "task": task,
        "model": model,
        "training": {
            "optimizer": "adam",
            "lr": 0.01,
            "batch_size": 8,
            "local_epochs": 2,
            "rounds": 2,
        },
        "malfunction_params": {"placement": "first"},
    }
    spec.update(overrides)
    return filled_spec(spec)
