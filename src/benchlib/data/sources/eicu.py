"""eICU (eICU Collaborative Research Database, PhysioNet; credentialed access): bring your own.

TFL (Table 2) predicts in-hospital mortality from EHR features, one client per hospital: 58
hospitals of the MIDWEST, NORTHEAST and SOUTH regions train, the 14 WEST hospitals are OOF. The
paper does not publish its feature extraction, so this source reads one CSV the user derives
from the database (``params.path``): one row per ICU stay with the columns ``hospitalid``,
``region`` (as in eICU's ``hospital`` table), the binary target (``params.target``, default
``hospital_mortality``: 1 = expired) and numeric features (``params.features``, default every
other numeric column). Groups are ``<region>_<hospitalid>`` with the regions in the order
MIDWEST, NORTHEAST, SOUTH, WEST, so under the ``groups`` partition with one client per hospital
the WEST hospitals get the last client ids (58..71 for the paper's 72 hospitals). Features are
standardised (mean 0, std 1 over all rows); missing values become the column mean.
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

ACCESS = "https://physionet.org/content/eicu-crd/2.0/"
REGIONS = ("MIDWEST", "NORTHEAST", "SOUTH", "WEST")


def prepare_eicu(out_dir: Path, params: dict[str, Any]) -> None:
    """Read the user's per-stay CSV, check its columns, write a tabular classification store."""
    path = resolve_input_path(params["path"], "eicu params.path")
    table = pd.read_csv(path)
    target = str(params["target"])
    missing = [c for c in ("hospitalid", "region", target) if c not in table]
    require(not missing, f"{path}: no columns {missing}; the eICU CSV needs hospitalid, region "
            f"and the target (params.target)")  # fmt: skip
    table = table[table["region"].isin(REGIONS)].reset_index(drop=True)
    require(len(table) > 0, f"{path}: no rows with region in {REGIONS}")
    labels = table[target].to_numpy()
    require(
        set(np.unique(labels).tolist()) <= {0, 1},
        f"{path}: target {target} must be 0/1 (1 = died in hospital)",
    )
    features = params.get("features") or [  # unset: every other numeric column
        c
        for c in table.select_dtypes("number").columns
        if c not in (target, "hospitalid", "patientunitstayid")
    ]
    require(bool(features), f"{path}: no numeric feature columns; set params.features")
    x = table[features].to_numpy(dtype=np.float64)
    mean = np.nanmean(x, axis=0)
    x = np.where(np.isnan(x), mean, x)
    std = x.std(axis=0)
    x = ((x - mean) / np.where(std > 0, std, 1.0)).astype(np.float32)
    rank = {r: i for i, r in enumerate(REGIONS)}
    group = [
        f"{rank[r]}{r}_{int(h):05d}"
        for r, h in zip(table["region"], table["hospitalid"], strict=True)
    ]
    index = pd.DataFrame(
        {
            "sample_id": [f"stay-{i:07d}" for i in range(len(table))],
            "label": labels.astype(np.int64),
            "group": group,
            "source_split": "",
        }
    )
    hospitals = table.groupby("region")["hospitalid"].nunique().to_dict()
    write_store(
        out_dir,
        dataset="eicu",
        index=index,
        features=x,
        num_classes=2,
        sources=[{"name": path.name, "sha256": sha256_file(path)}],
        extra={"features": list(features), "hospitals_per_region": hospitals},
    )


register_dataset(
    DatasetSource(
        name="eicu",
        build=prepare_eicu,
        num_classes=2,
        image_shape=(),
        description="eICU in-hospital mortality per hospital (TFL Table 2), bring your own",
        access_page=ACCESS,
        params=Params(
            {
                # unset until the user has the data: a missing copy stops the prepare step
                "path": Param(
                    {"type": "string"},
                    description="your per-stay CSV (hospitalid, region, target, features)",
                ),
                "target": Param(
                    {"type": "string"}, "hospital_mortality", "the 0/1 target column (1 = died)"
                ),
                "features": Param(
                    {"type": "array", "items": {"type": "string"}},
                    description="feature columns (default: every other numeric column)",
                ),
            }
        ),
    )
)
