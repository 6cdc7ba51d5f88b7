"""Gather many metrics.json files into one tidy CSV (one row per cell x client).

Columns: the cell and client fields, then one column per per-client test metric (every flat
``test_<metric>`` key of the clients' entries, sorted), then ``class_counts`` where a cell
recorded them (metrics.json ``class_counts``: per client the per-class true / predicted /
correct counts of its test predictions, as compact JSON; from them the report computes macro
scores of the pooled predictions), then the subset sizes, then ``nonfinite`` where any cell
diverged (the count of non-finite models in its metrics.json ``history.nonfinite``, 0 for the
other cells): the tables mark those cells.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.io import loads_json, write_with_atomic

ID_COLUMNS = [
    "experiment",
    "dataset",
    "malfunction",
    "method_id",
    "method",
    "k",
    "seed",
    "client",
    "malicious",
]
SIZE_COLUMNS = ["n_train", "n_val", "n_test"]
COUNTS_COLUMN = "class_counts"
NONFINITE_COLUMN = "nonfinite"  # a diverged cell: how many non-finite models its history records
METRIC_PREFIX = "test_"
AXIS_PREFIX = "axis_"  # grid-axis values of a variant experiment's cells (benchlib.grid.axes)


def metric_columns(rows: list[dict], prefix: str = METRIC_PREFIX) -> list[str]:
    """The sorted ``<prefix>*`` keys with scalar values found in any row."""
    found = {
        key
        for row in rows
        for key, value in row.items()
        if key.startswith(prefix) and (value is None or isinstance(value, int | float | str))
    }
    return sorted(found)


def metrics_rows(path: Path) -> list[dict]:
    """Rows of one metrics.json file."""
    require(path.is_file(), f"metrics file {path} not found; run its cell first")
    try:
        metrics = loads_json(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchlibError(f"{path} is not valid JSON; delete it and rerun its cell") from exc
    require(
        isinstance(metrics, dict)
        and isinstance(metrics.get("cell"), dict)
        and isinstance(metrics.get("clients"), list)
        and all(isinstance(c, dict) and "client" in c for c in metrics["clients"]),
        f"{path} is not a cell's metrics file (it lacks the cell or its clients); delete it and "
        "rerun its cell",
    )
    cell = metrics["cell"]
    counts = metrics.get(COUNTS_COLUMN) or {}
    history = metrics.get("history")
    nonfinite = history.get("nonfinite") if isinstance(history, dict) else None
    rows = []
    for client in metrics["clients"]:
        row = {**cell, **client}
        if str(client["client"]) in counts:
            row[COUNTS_COLUMN] = json.dumps(counts[str(client["client"])], separators=(",", ":"))
        if nonfinite:
            row[NONFINITE_COLUMN] = len(nonfinite)
        rows.append(row)
    return rows


def collect(paths: list[Path], experiment: str | None = None) -> pd.DataFrame:
    """A tidy frame of all clients of all given cells, sorted for stable output; with
    ``experiment``, every row is listed under it (a reading variant's table reads the cells it
    shares with the variant at the default reading under its own name)."""
    rows = [row for path in sorted(paths) for row in metrics_rows(path)]
    if experiment is not None:
        for row in rows:
            row["experiment"] = experiment
    columns = [
        *ID_COLUMNS,
        *metric_columns(rows, AXIS_PREFIX),
        *metric_columns(rows),
        *([COUNTS_COLUMN] if any(COUNTS_COLUMN in row for row in rows) else []),
        *SIZE_COLUMNS,
        *([NONFINITE_COLUMN] if any(NONFINITE_COLUMN in row for row in rows) else []),
    ]
    frame = pd.DataFrame(rows, columns=columns)
    if NONFINITE_COLUMN in frame:
        frame[NONFINITE_COLUMN] = frame[NONFINITE_COLUMN].fillna(0).astype(int)
    return frame.sort_values(["experiment", "malfunction", "method_id", "k", "seed", "client"])


def write_collected(paths: list[Path], out: Path, experiment: str | None = None) -> pd.DataFrame:
    frame = collect(paths, experiment)
    write_with_atomic(out, lambda tmp: frame.to_csv(tmp, index=False, float_format="%.10g"))
    return frame
