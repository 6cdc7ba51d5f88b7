"""``tabular_csv``: tabular rows from a local CSV file (regression or classification).

``params.path`` names the CSV; ``params.target`` the target column (or a list of columns),
``params.group`` an optional column of natural groups (site, region, hospital...), and
``params.features`` the feature columns (default: every other numeric column). With ``task:
classification`` the single target column holds integer class ids; otherwise targets are floats.
Rows keep the file's order; sample ids are ``row-<n>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.paths import resolve_input_path
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.primitives.io import sha256_file


def prepare_tabular_csv(out_dir: Path, params: dict[str, Any]) -> None:
    """Read the CSV, check its columns and values, write a tabular store."""
    path = resolve_input_path(params["path"], "tabular_csv params.path")
    table = pd.read_csv(path)
    targets = [params["target"]] if isinstance(params["target"], str) else list(params["target"])
    group = params.get("group")  # unset: no natural groups
    features = params.get("features") or [  # unset: every other numeric column
        c for c in table.select_dtypes("number").columns if c not in targets and c != group
    ]
    missing = sorted(set(features) | set(targets) | ({group} if group else set()))
    missing = [c for c in missing if c not in table]
    require(not missing, f"{path}: no columns {missing}; fix params.features/target/group")
    x = table[features].to_numpy(dtype=np.float32)
    y = table[targets].to_numpy(dtype=np.float32)
    require(
        bool(np.isfinite(x).all() and np.isfinite(y).all()),
        f"{path}: feature or target values are empty, NaN or Inf; clean the file",
    )
    classification = params["task"] == "classification"
    labels = y[:, 0].astype(np.int64) if classification else np.zeros(len(table), np.int64)
    index = pd.DataFrame(
        {
            "sample_id": [f"row-{i:06d}" for i in range(len(table))],
            "label": labels,
            "group": table[group].astype(str) if group else "",
            "source_split": "",
        }
    )
    write_store(
        out_dir,
        dataset="tabular_csv",
        index=index,
        features=x,
        targets=None if classification else y,
        num_classes=int(labels.max()) + 1 if classification else 1,
        sources=[{"name": path.name, "sha256": sha256_file(path)}],
        task="classification" if classification else "regression",
        extra={"features": features, "targets": targets},
    )


register_dataset(
    DatasetSource(
        name="tabular_csv",
        build=prepare_tabular_csv,
        num_classes=1,
        image_shape=(),
        task="regression",
        description="tabular rows from a local CSV file",
        params=Params(
            {
                "path": Param({"type": "string"}, description="the CSV file", required=True),
                "target": Param(
                    {
                        "oneOf": [
                            {"type": "string"},
                            {"type": "array", "items": {"type": "string"}, "minItems": 1},
                        ]
                    },
                    description="the target column, or a list of them (regression)",
                    required=True,
                ),
                "group": Param({"type": "string"}, description="a column of natural groups"),
                "features": Param(
                    {"type": "array", "items": {"type": "string"}},
                    description="feature columns (default: every other numeric column)",
                ),
            }
        ),
    )
)
