"""TPT-48: monthly average temperature (degrees F) of the 48 contiguous US states, 2008-2019
(144 months per state), as released in Wang-ML-Lab/VDI (``TPT-48/train_data/data/
month_temp_data.pkl``, MIT; a pickle of ``{state: float64[144]}``, read with the restricted
unpickler).

Two sources: ``tpt48`` downloads the file pinned by commit and sha256 (the workflow's
``download_data`` rule); ``tpt48_local`` reads a local copy (``params.path``, checked against the
same sha256 unless ``params.sha256`` pins another).

Samples (the TFL task, VDI's windows): every 12-month window of a state's series, stride 1; the
input is the first 6 months, the target the next 6. Windows whose 12 months lie in 2008-2016
(months 0-107) are ``train``; windows starting in 2017 or later (months 108-143) are ``test``
(the held-out months); the 11 windows straddling the boundary are dropped, so train and test
months never overlap. Temperatures are standardised with the mean and standard deviation of all
48 series (VDI standardises with one global mean and std; the exact statistics set is the
paper's unknown). ``group`` is the state's two-letter code, so the ``groups`` partition with 48
clients makes client i the i-th state in alphabetical order (:data:`STATES`).

The TFL splits (docs/papers/tfl.md): N(24) -> S(24) from the VDI release's configs (:data:`NORTH`,
:data:`SOUTH`); E(24) -> W(24) by the longitude of each state's geographic centroid
(:data:`CENTROID_LONGITUDE_W`, degrees west, rounded): the 24 easternmost states are
:data:`EAST`, the rest :data:`WEST`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.download import (
    RemoteFile,
    download_params,
    fetch_source_file,
    register_remote_files,
)
from benchlib.data.paths import resolve_input_path
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import sha256_file

FILE = "month_temp_data.pkl"
COMMIT = "21452a842d1de685efdcc0e751934c2df7abbfc6"
URL = f"https://raw.githubusercontent.com/Wang-ML-Lab/VDI/{COMMIT}/TPT-48/train_data/data/{FILE}"
SHA256 = "f996d73fd0cb4a13d9ef2015b6a2cf973dc88c0e21c368cef18c2b16c874bea4"
MONTHS = 144
INPUT_MONTHS = 6
WINDOW = 2 * INPUT_MONTHS
TEST_START = 108  # January 2017

# Approximate longitude (degrees west) of each state's geographic centroid.
CENTROID_LONGITUDE_W: dict[str, float] = {
    "AL": 86.8, "AR": 92.4, "AZ": 111.7, "CA": 119.4, "CO": 105.5, "CT": 72.7, "DE": 75.5,
    "FL": 82.4, "GA": 83.4, "IA": 93.5, "ID": 114.6, "IL": 89.2, "IN": 86.3, "KS": 98.4,
    "KY": 85.3, "LA": 92.0, "MA": 71.8, "MD": 76.8, "ME": 69.2, "MI": 85.4, "MN": 94.3,
    "MO": 92.5, "MS": 89.7, "MT": 109.6, "NC": 79.4, "ND": 100.5, "NE": 99.8, "NH": 71.6,
    "NJ": 74.7, "NM": 106.1, "NV": 116.6, "NY": 75.5, "OH": 82.8, "OK": 97.5, "OR": 120.6,
    "PA": 77.8, "RI": 71.5, "SC": 80.9, "SD": 100.2, "TN": 86.3, "TX": 99.3, "UT": 111.7,
    "VA": 78.8, "VT": 72.7, "WA": 120.4, "WI": 89.8, "WV": 80.6, "WY": 107.6,
}  # fmt: skip
STATES: tuple[str, ...] = tuple(sorted(CENTROID_LONGITUDE_W))
EAST: tuple[str, ...] = tuple(sorted(sorted(STATES, key=CENTROID_LONGITUDE_W.get)[:24]))
WEST: tuple[str, ...] = tuple(s for s in STATES if s not in EAST)
NORTH: tuple[str, ...] = tuple(sorted([
    "ND", "VT", "NH", "ME", "WA", "MT", "SD", "MN", "WI", "MI", "NY", "MA",
    "OR", "ID", "WY", "NE", "IA", "IL", "IN", "OH", "PA", "NJ", "CT", "RI",
]))  # fmt: skip
SOUTH: tuple[str, ...] = tuple(s for s in STATES if s not in NORTH)
SPLITS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "E->W": (EAST, WEST),
    "N->S": (NORTH, SOUTH),
}


def client_ids(states: tuple[str, ...]) -> list[int]:
    """Client ids of ``states`` under the ``groups`` partition with 48 clients."""
    return [STATES.index(s) for s in states]


def load_series(path: Path) -> dict[str, np.ndarray]:
    """The state -> 144 temperatures mapping of the release's pickle (restricted unpickler)."""
    from benchlib.data.safe_pickle import load_pickle

    data = load_pickle(path)
    require(isinstance(data, dict), f"{path}: expected a dict of state -> series, not {type(data)}")
    missing = sorted(set(STATES) - set(data))
    require(not missing, f"{path}: states {missing} missing; this is not the TPT-48 release")
    series = {}
    for state in STATES:
        values = np.asarray(data[state], dtype=np.float64)
        require(
            values.shape == (MONTHS,) and bool(np.isfinite(values).all()),
            f"{path}: state {state} has shape {values.shape} or non-finite values; expected "
            f"{MONTHS} finite monthly temperatures",
        )
        series[state] = values
    return series


def windows(series: dict[str, np.ndarray]) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """(index, standardised inputs [n, 6], standardised targets [n, 6]) over all states."""
    stacked = np.stack([series[s] for s in STATES])
    mean, std = float(stacked.mean()), float(stacked.std())
    rows, inputs, targets = [], [], []
    for state in STATES:
        z = (series[state] - mean) / std
        for start in range(MONTHS - WINDOW + 1):
            if start + WINDOW <= TEST_START:
                subset = "train"
            elif start >= TEST_START:
                subset = "test"
            else:
                continue
            rows.append((f"{state}-{start:03d}", state, subset))
            inputs.append(z[start : start + INPUT_MONTHS])
            targets.append(z[start + INPUT_MONTHS : start + WINDOW])
    index = pd.DataFrame(rows, columns=["sample_id", "group", "source_split"])
    index.insert(1, "label", 0)
    return (
        index,
        np.asarray(inputs, dtype=np.float32),
        np.asarray(targets, dtype=np.float32),
    )


def write_tpt48(out_dir: Path, path: Path, source: str, sha256: str) -> None:
    """Check the pickle's sha256, build the windows, write the regression store."""
    actual = sha256_file(path)
    require(
        actual == sha256,
        f"checksum mismatch for {path}: expected sha256 {sha256}, got {actual}; use the "
        f"release file of Wang-ML-Lab/VDI commit {COMMIT} or pin its sha256 in params.sha256",
    )
    series = load_series(path)
    index, inputs, targets = windows(series)
    stacked = np.stack([series[s] for s in STATES])
    write_store(
        out_dir,
        dataset="tpt48",
        index=index,
        features=inputs,
        targets=targets,
        num_classes=1,
        sources=[{"name": source, "sha256": actual}],
        task="regression",
        extra={
            "states": list(STATES),
            "mean_f": float(stacked.mean()),
            "std_f": float(stacked.std()),
            "test_start_month": TEST_START,
        },
    )


def prepare_tpt48(out_dir: Path, params: dict[str, Any]) -> None:
    """Fetch (or re-check) the release file, then build the store."""
    remote, path = fetch_source_file("tpt48", FILE, params)
    write_tpt48(out_dir, path, remote.url, remote.sha256)


def prepare_tpt48_local(out_dir: Path, params: dict[str, Any]) -> None:
    """A local copy of the release file (``params.path``)."""
    path = resolve_input_path(params["path"], "tpt48_local params.path")
    if path.is_dir():
        path = path / FILE
    if not path.is_file():
        raise BenchlibError(f"tpt48_local params.path: {path} is not a file; point it at {FILE}")
    write_tpt48(out_dir, path, path.name, str(params["sha256"]).lower())


FILES = (RemoteFile(FILE, URL, SHA256),)
register_remote_files("tpt48", FILES)
_LOCAL = {
    "path": Param(
        {"type": "string"}, description=f"a local copy of {FILE} (or its folder)", required=True
    ),
    "sha256": Param(
        {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"},
        SHA256,
        "sha256 the local copy must have (the VDI release's)",
    ),
}
for _name, _build, _text, _params in (
    (
        "tpt48",
        prepare_tpt48,
        "TPT-48 state temperatures (download pinned by commit and sha256)",
        download_params(FILES),
    ),
    ("tpt48_local", prepare_tpt48_local, "TPT-48 state temperatures from a local copy", _LOCAL),
):
    register_dataset(
        DatasetSource(
            name=_name,
            build=_build,
            params=Params(_params),
            num_classes=1,
            image_shape=(),
            task="regression",
            description=_text,
        )
    )
