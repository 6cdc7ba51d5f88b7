"""Paper-vs-ours by table column (FedAgain, TFL): the ``columns`` mode of ``paper_comparison``.

Paper values (config/paper_values/{tfl,fedagain}.csv): one row per printed number, columns
``source`` (``Table 4``, ``Figure 9``), ``column`` (the paper's column or group), ``method``
(the config's method id), ``metric``, ``mean``, ``std`` (empty where the paper prints none),
``approx`` (``yes`` where the text only says "about"). A report column names the paper column,
the experiments whose cells give ours and how a cell is scored (:data:`SCOPES`):

- ``if`` / ``oof``: per cell the mean test metric over the in-federation / held-out clients (as
  TFL's tables); units for the interval and the paired test: seed x client (x experiment);
- ``pooled``: per cell the global model's metric on the clients' pooled test sets (as FedAgain's
  figures); units: experiment x seed.

Ours = mean over the column's cells (the experiments' seeds); metrics in [0, 1] in percent.
"""

from __future__ import annotations

import csv
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib import layout
from benchlib.errors import require

# how far a run is from the paper: stated in the first lines of every comparison report
SCALES = {
    "paper": "paper grid (the paper's data, clients, rounds and k)",
    "sample": "CPU sample (smaller data and grid): NOT a reproduction, not comparable",
    "demo": "demo (another dataset at CPU scale): NOT a reproduction, not comparable",
}

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

VALUE_COLUMNS = ("source", "column", "method", "metric", "mean", "std")
# FedAgain's macro scores, in [0, 1] like accuracy: shown in percent as the paper prints them
MACRO_METRICS = frozenset({"recall_macro", "precision_macro", "f1_macro"})
NOT_SCORED = frozenset({"round", "c_params_m", "seconds"})  # paper numbers no cell metric gives
COLUMN_ENTRY = {
    "type": "object",
    "additionalProperties": False,
    "required": ["source", "column", "experiments", "scope"],
    "properties": {
        "source": {"type": "string", "description": "the paper's table or figure (paper values)"},
        "column": {"type": "string", "description": "the paper's column / group in that source"},
        "experiments": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string"},
            "description": "experiments whose cells give ours (fnmatch patterns allowed)",
        },
        "scope": {"enum": ["if", "oof", "pooled"], "description": "how a cell is scored"},
        "metrics": {
            "type": "array",
            "items": {"type": "string"},
            "description": "default: every metric the paper prints for the column",
        },
        "methods": {
            "type": "array",
            "items": {"type": "string"},
            "description": "default: the paper's methods of the column the experiments run",
        },
    },
}


def read_table_values(path: Path) -> pd.DataFrame:
    """The transcribed values (``approx`` as a bool, ``std`` NaN where none is printed)."""
    import pandas as pd

    require(Path(path).is_file(), f"paper values {path} not found; restore it from the repository")
    frame = pd.read_csv(path, dtype={"source": str, "column": str, "method": str, "metric": str})
    missing = sorted(set(VALUE_COLUMNS) - set(frame.columns))
    require(not missing, f"{path} lacks the columns {', '.join(missing)}")
    approx = frame["approx"] if "approx" in frame else pd.Series("no", index=frame.index)
    return frame.assign(approx=approx.astype(str).str.lower().eq("yes"))


def _paper_cells(path: Path) -> dict[tuple[str, str], dict[str, list[str]]]:
    """(source, column) -> metric -> methods, read without pandas (at config load)."""
    cells: dict[tuple[str, str], dict[str, list[str]]] = {}
    with Path(path).open(newline="") as handle:
        for row in csv.DictReader(handle):
            metrics = cells.setdefault((row["source"], row["column"]), {})
            metrics.setdefault(row["metric"], []).append(row["method"])
    return cells


def _experiments(config: ReportConfig, patterns: list[str]) -> list[str]:
    found: list[str] = []
    for pattern in patterns:
        hits = [e for e in config.experiments if fnmatch.fnmatchcase(e, pattern)]
        require(bool(hits), f"no experiment matches {pattern!r}")
        found += [e for e in hits if e not in found]
    return found


def column_specs(
    config: ReportConfig, entries: list[dict[str, Any]], values: Path
) -> list[dict[str, Any]]:
    """One spec per report column: experiments resolved, metrics and methods defaulted, the
    cells' files (metrics.json for if/oof, collected CSVs for pooled)."""
    paper = _paper_cells(values)
    specs = []
    for entry in entries:
        key = (entry["source"], entry["column"])
        require(key in paper, f"{values} has no column {entry['column']!r} of {entry['source']}")
        experiments = _experiments(config, entry["experiments"])
        run = [m for m in config.experiments[experiments[0]]["methods"]]
        for experiment in experiments[1:]:
            run = [m for m in run if m in config.experiments[experiment]["methods"]]
        metrics = entry.get("metrics") or [m for m in paper[key] if m not in NOT_SCORED]
        printed = list(dict.fromkeys(m for metric in metrics for m in paper[key].get(metric, [])))
        methods = entry.get("methods") or [m for m in printed if m in run]
        require(bool(methods), f"{key}: the experiments run none of the paper's methods {printed}")
        absent = [m for m in methods if m not in run]
        require(not absent, f"{key}: experiments {experiments} do not all run {absent}")
        specs.append(
            {
                **{k: entry[k] for k in ("source", "column", "scope")},
                "experiments": experiments,
                "metrics": metrics,
                "methods": [[m, config.method_label(m)] for m in methods],
                "files": _files(config, experiments, methods, entry["scope"]),
            }
        )
    return specs


def _files(
    config: ReportConfig, experiments: list[str], methods: list[str], scope: str
) -> list[dict[str, Any]]:
    if scope == "pooled":
        return [{"path": layout.collected_csv(e, "none")} for e in experiments]
    return [
        {"path": c.metrics_path, "experiment": e, "method": c.method, "seed": c.seed}
        for e in experiments
        for c in config.cells(e)
        if c.method in methods
    ]


def spec_inputs(columns: list[dict[str, Any]]) -> list[str]:
    """Every file of every column once, in order (the report's inputs after the paper CSV)."""
    return list(dict.fromkeys(f["path"] for c in columns for f in c["files"]))


# ------------------------------------------------------------------ reading ours back
@dataclass(frozen=True)
class Scored:
    """What a column's cells gave: per cell value and per unit value, long frames with the
    columns method, metric, cell, (unit,) value (metric in [0, 1] not yet in percent)."""

    cells: pd.DataFrame
    units: pd.DataFrame


def _client_units(column: dict[str, Any], files: dict[str, Path]) -> Scored:
    import pandas as pd

    from benchlib.report.kinds.common.history import read_json
    from benchlib.report.kinds.tfl.runs import SCOPES, cell_value

    key = SCOPES[column["scope"]]
    cells, units = [], []
    for entry in column["files"]:
        path = files[entry["path"]]
        metrics = read_json(path, "metrics file")
        cell = (entry["experiment"], entry["seed"])
        for metric in column["metrics"]:
            name = f"test_{metric}"
            value = cell_value(metrics, column["scope"], name, str(path))
            cells.append(
                {"method": entry["method"], "metric": metric, "cell": cell, "value": value}
            )
            for client in metrics.get(key) or []:
                if client.get(name) is not None:
                    unit = (*cell, client["client"])
                    units.append(
                        {"method": entry["method"], "metric": metric, "unit": unit}
                        | {"value": float(client[name])}
                    )
    return Scored(pd.DataFrame(cells), pd.DataFrame(units))


def _pooled_units(column: dict[str, Any], files: dict[str, Path]) -> Scored:
    import pandas as pd

    from benchlib.report.kinds.fedagain.fedagain_fig13 import pooled_metric

    paths = [files[f["path"]] for f in column["files"]]
    collected = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    collected = collected[collected["experiment"].isin(column["experiments"])]
    methods = [m for m, _ in column["methods"]]
    parts = []
    for metric in column["metrics"]:
        per_cell = pooled_metric(collected, metric)
        per_cell = per_cell[per_cell["method_id"].isin(methods)]
        parts.append(
            pd.DataFrame(
                {
                    "method": per_cell["method_id"],
                    "metric": metric,
                    "unit": list(zip(per_cell["experiment"], per_cell["seed"], strict=True)),
                    "value": per_cell["value"].astype(float),
                }
            )
        )
    units = pd.concat(parts, ignore_index=True)
    return Scored(units.rename(columns={"unit": "cell"}), units)


# scope -> how the column's cells are read and scored
SCOPE_READERS: dict[str, Callable[[dict[str, Any], dict[str, Path]], Scored]] = {
    "if": _client_units,
    "oof": _client_units,
    "pooled": _pooled_units,
}


def score_columns(columns: list[dict[str, Any]], inputs: list[Path]) -> tuple[Any, Any]:
    """(cells, units): long frames over every report column with ``source``, ``column``,
    ``metric``, ``method`` and ``value`` (percent for [0, 1] metrics), in the report's column
    and method order; ``inputs`` are the files of :func:`spec_inputs` in that order."""
    import pandas as pd

    from benchlib.report.stats import PERCENT_METRICS

    percent_metrics = PERCENT_METRICS | MACRO_METRICS
    names = spec_inputs(columns)
    require(len(inputs) == len(names), f"expected {len(names)} cell files, got {len(inputs)}")
    files = dict(zip(names, inputs, strict=True))
    cells, units = [], []
    for position, column in enumerate(columns):
        scored = SCOPE_READERS[column["scope"]](column, files)
        where = {"source": column["source"], "column": column["column"], "position": position}
        order = {m: i for i, (m, _) in enumerate(column["methods"])}
        for frame, out in ((scored.cells, cells), (scored.units, units)):
            out.append(frame.assign(**where, order=frame["method"].map(order)))
    cells_frame, units_frame = pd.concat(cells), pd.concat(units)
    for frame in (cells_frame, units_frame):
        percent = frame["metric"].isin(percent_metrics)
        frame.loc[percent, "value"] = 100 * frame.loc[percent, "value"]
    keys = ["position", "metric", "order"]  # the config's column order, the methods' order
    return (
        cells_frame.sort_values(keys, kind="stable").reset_index(drop=True),
        units_frame.sort_values(keys, kind="stable").reset_index(drop=True),
    )
