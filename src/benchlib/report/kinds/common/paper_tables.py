"""Paper-vs-ours by table column (FedAgain, TFL): the ``columns`` mode of ``paper_comparison``.

Paper values (config/paper_values/{tfl,fedagain}.csv): one row per printed number, columns
``source`` (``Table 4``, ``Figure 9``), ``column`` (the paper's column or group), ``method``
(the config's method id), ``metric``, ``mean``, ``std`` (empty where the paper prints none),
``approx`` (``yes`` where the text only says "about"). A report column names the paper column,
the experiments whose cells give ours and how a cell is scored (:data:`SCOPES`):

- ``if`` / ``oof``: per cell the in-federation / held-out clients' test metric as TFL's tables
  (report kind ``tfl_table``) score it: ``pooling: pooled`` (default), the metric of the scope's
  pooled predictions (metrics.json ``pooled``); ``pooling: clients`` (the default for
  segmentation, whose cells record no pooled scores), the mean over the scope's clients;
- ``pooled``: per cell the global model's metric on the clients' pooled test sets (as FedAgain's
  figures).

The statistical units of the interval and the paired test are the cells (experiment x seed),
never the clients of one run. Ours = mean over the column's cells; metrics in [0, 1] in percent.

A paper method matches the config method of the same id, else the one config method the
experiments run whose underlying method (the methods entry's ``method``) it names (the paper's
``fedsr`` is the config's ``fedsr_r50``). Every paper value of a compared source (table) that no
cell gives is listed in the report with the reason (:func:`uncompared_values`), never dropped.
"""

from __future__ import annotations

import csv
import fnmatch
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from benchlib.primitives import layout
from benchlib.primitives.errors import require

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
        "pooling": {
            "enum": ["pooled", "clients"],
            "description": "if / oof: the scope's pooled predictions, or the mean of its "
            "clients' values (default: clients for segmentation, else pooled, as tfl_table)",
        },
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


def matching_experiments(config: ReportConfig, patterns: list[str], where: str = "") -> list[str]:
    """The experiments the glob ``patterns`` name, in order, each once; a pattern that matches
    none is an error (``where`` prefixes it)."""
    found: list[str] = []
    for pattern in patterns:
        hits = [e for e in config.experiments if fnmatch.fnmatchcase(e, pattern)]
        require(bool(hits), f"{where + ': ' if where else ''}no experiment matches {pattern!r}")
        found += [e for e in hits if e not in found]
    return found


def _pooling(config: ReportConfig, entry: dict[str, Any], experiments: list[str]) -> str | None:
    """How an if / oof column scores a cell (None for a ``pooled`` column): the entry's
    ``pooling``, else as tfl_table: clients for segmentation, else pooled."""
    if entry["scope"] == "pooled":
        require("pooling" not in entry, f"{entry['column']}: scope pooled takes no pooling")
        return None
    tasks = {config.datasets[config.experiments[e]["dataset"]]["task"] for e in experiments}
    segmentation = "segmentation" in tasks
    pooling = entry.get("pooling") or ("clients" if segmentation else "pooled")
    require(
        not (segmentation and pooling == "pooled"),
        f"{entry['source']}, {entry['column']}: segmentation cells record no pooled scores; "
        "set pooling: clients",
    )
    return pooling


def match_methods(config: ReportConfig, printed: list[str], run: list[str]) -> dict[str, str]:
    """paper method -> the config method id whose cells give it: the id itself, else the one
    run method whose underlying method it names; paper methods no run method gives are left
    out (an error when several would)."""
    found = {}
    for paper in printed:
        if paper in run:
            found[paper] = paper
            continue
        hits = [m for m in run if config.methods[m]["method"] == paper]
        require(
            len(hits) <= 1,
            f"the paper's {paper!r} matches several config methods {hits}; name the one to "
            "compare in the column's methods",
        )
        if hits:
            found[paper] = hits[0]
    return found


def column_specs(
    config: ReportConfig, entries: list[dict[str, Any]], values: Path
) -> list[dict[str, Any]]:
    """One spec per report column: experiments resolved, metrics and methods defaulted, paper
    methods matched to config methods (:func:`match_methods`), the paper values the column
    leaves out with the reason (``skipped``), the cells' files (metrics.json for if/oof,
    collected CSVs for pooled)."""
    paper = _paper_cells(values)
    specs = []
    for entry in entries:
        key = (entry["source"], entry["column"])
        require(key in paper, f"{values} has no column {entry['column']!r} of {entry['source']}")
        experiments = matching_experiments(config, entry["experiments"])
        run = [m for m in config.experiments[experiments[0]]["methods"]]
        for experiment in experiments[1:]:
            run = [m for m in run if m in config.experiments[experiment]["methods"]]
        metrics = entry.get("metrics") or [m for m in paper[key] if m not in NOT_SCORED]
        printed = list(dict.fromkeys(m for metric in metrics for m in paper[key].get(metric, [])))
        matched = match_methods(config, printed, run)
        if entry.get("methods"):
            methods = list(entry["methods"])
            absent = [m for m in methods if m not in run]
            require(not absent, f"{key}: experiments {experiments} do not all run {absent}")
        else:
            methods = list(dict.fromkeys(matched.values()))
        require(bool(methods), f"{key}: the experiments run none of the paper's methods {printed}")
        # config method id -> the paper's name for it
        paper_names = {m: next((p for p, c in matched.items() if c == m), m) for m in methods}
        specs.append(
            {
                **{k: entry[k] for k in ("source", "column", "scope")},
                "pooling": _pooling(config, entry, experiments),
                "experiments": experiments,
                "metrics": metrics,
                "methods": [[m, config.method_label(m)] for m in methods],
                "paper_methods": paper_names,
                "skipped": _skipped(paper[key], metrics, matched, methods),
                "files": _files(config, experiments, methods, entry["scope"]),
            }
        )
    return specs


def _skipped(
    printed: dict[str, list[str]],
    metrics: list[str],
    matched: dict[str, str],
    methods: list[str],
) -> list[list[str]]:
    """[metric, paper method, reason] for every paper value of the column no cell gives."""
    out = []
    for metric, names in printed.items():
        for name in names:
            if metric in NOT_SCORED:
                reason = "no cell metric gives it"
            elif metric not in metrics:
                reason = "metric not in the column's metrics"
            elif name not in matched:
                reason = "no cell: the experiments do not run it"
            elif matched[name] not in methods:
                reason = "not in the column's methods"
            else:
                continue
            out.append([metric, name, reason])
    return out


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
    columns method, metric, cell, (unit,) value (metric in [0, 1] not yet in percent), run (the
    cell's id, ``experiment/malfunction/method/kK/seedS``) and diverged (the cell's models went
    non-finite: metrics.json ``history.nonfinite``)."""

    cells: pd.DataFrame
    units: pd.DataFrame


def _scope_units(column: dict[str, Any], files: dict[str, Path]) -> Scored:
    """if / oof: each cell scored as tfl_table scores it (its column's ``pooling``); the cells
    (experiment x seed) are the units."""
    import pandas as pd

    from benchlib.report.kinds.common.history import read_json
    from benchlib.report.kinds.tfl.runs import cell_value

    cells = []
    for entry in column["files"]:
        path = files[entry["path"]]
        metrics = read_json(path, "metrics file")
        cell = (entry["experiment"], entry["seed"])
        history = metrics.get("history")
        flags = {
            "run": _cell_id(entry["path"]),  # a variant may read another's cell: name the run
            "diverged": isinstance(history, dict) and bool(history.get("nonfinite")),
        }
        for metric in column["metrics"]:
            value = cell_value(
                metrics, column["scope"], f"test_{metric}", str(path), column["pooling"]
            )
            cells.append(
                {"method": entry["method"], "metric": metric, "cell": cell, "value": value} | flags
            )
    frame = pd.DataFrame(cells)
    return Scored(frame, frame.rename(columns={"cell": "unit"}))


def _cell_id(path: str) -> str:
    """The cell id of a metrics.json path under ``results/runs`` (else its folder)."""
    folder = PurePosixPath(path).parent
    try:
        return str(folder.relative_to(layout.RUNS))
    except ValueError:
        return str(folder)


def _pooled_units(column: dict[str, Any], files: dict[str, Path]) -> Scored:
    import pandas as pd

    from benchlib.report.kinds.fedagain.fedagain_fig13 import pooled_metric

    paths = [files[f["path"]] for f in column["files"]]
    collected = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    collected = collected[collected["experiment"].isin(column["experiments"])]
    methods = [m for m, _ in column["methods"]]
    keys = ["experiment", "method_id", "seed"]
    nonfinite = collected.get("nonfinite", pd.Series(0, index=collected.index))
    by_cell = collected.assign(_diverged=nonfinite.fillna(0).astype(int) > 0).groupby(keys)
    diverged = by_cell["_diverged"].any()  # any of the cell's rows (clients) records some
    where = by_cell[["malfunction", "k"]].first()
    parts = []
    for metric in column["metrics"]:
        per_cell = pooled_metric(collected, metric)
        per_cell = per_cell[per_cell["method_id"].isin(methods)]
        cell_keys = [tuple(key) for key in per_cell[keys].itertuples(index=False)]
        parts.append(
            pd.DataFrame(
                {
                    "method": per_cell["method_id"],
                    "metric": metric,
                    "unit": list(zip(per_cell["experiment"], per_cell["seed"], strict=True)),
                    "value": per_cell["value"].astype(float),
                    "run": [
                        layout.CELL.format(
                            experiment=key[0],
                            malfunction=where.loc[key, "malfunction"],
                            method=key[1],
                            k=where.loc[key, "k"],
                            seed=key[2],
                        )
                        for key in cell_keys
                    ],
                    "diverged": [bool(diverged[key]) for key in cell_keys],
                }
            )
        )
    units = pd.concat(parts, ignore_index=True)
    return Scored(units.rename(columns={"unit": "cell"}), units)


# scope -> how the column's cells are read and scored
SCOPE_READERS: dict[str, Callable[[dict[str, Any], dict[str, Path]], Scored]] = {
    "if": _scope_units,
    "oof": _scope_units,
    "pooled": _pooled_units,
}


def score_columns(columns: list[dict[str, Any]], inputs: list[Path]) -> tuple[Any, Any]:
    """(cells, units): long frames over every report column with ``source``, ``column``,
    ``metric``, ``method``, ``value`` (percent for [0, 1] metrics) and ``diverged``, in the
    report's column and method order; ``inputs`` are the files of :func:`spec_inputs` in that
    order."""
    import pandas as pd

    from benchlib.report.statistics.table import PERCENT_METRICS

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


def paper_by_config_method(paper: pd.DataFrame, columns: list[dict[str, Any]]) -> pd.DataFrame:
    """The paper values of the report's columns with ``method`` the config method id that gives
    each (:func:`match_methods`), so they merge with our cells."""
    import pandas as pd

    parts = []
    for column in columns:
        rows = paper[(paper["source"] == column["source"]) & (paper["column"] == column["column"])]
        for method, name in column["paper_methods"].items():
            parts.append(rows[rows["method"] == name].assign(method=method))
    if not parts:
        return paper.iloc[0:0]
    return pd.concat(parts, ignore_index=True).drop_duplicates(
        subset=["source", "column", "metric", "method"]
    )


def uncompared_values(paper: pd.DataFrame, columns: list[dict[str, Any]]) -> pd.DataFrame:
    """Every paper value of the sources (tables, figures) the report compares that no cell of
    the report gives: source, column, metric, method (the paper's), mean, reason."""
    import pandas as pd

    sources = list(dict.fromkeys(c["source"] for c in columns))
    named = {(c["source"], c["column"]) for c in columns}
    skipped = {
        (c["source"], c["column"], metric, method): reason
        for c in columns
        for metric, method, reason in c["skipped"]
    }
    compared = {
        (c["source"], c["column"], metric, name)
        for c in columns
        for metric in c["metrics"]
        for name in c["paper_methods"].values()
    }
    rows = []
    for row in paper[paper["source"].isin(sources)].itertuples():
        key = (row.source, row.column, row.metric, row.method)
        if key in compared:
            continue
        if (row.source, row.column) not in named:
            reason = "column not in this report"
        elif key in skipped:
            reason = skipped[key]
        else:
            continue
        rows.append(dict(zip(("source", "column", "metric", "method"), key, strict=True)))
        rows[-1] |= {"mean": float(row.mean), "reason": reason}
    frame = pd.DataFrame(rows, columns=["source", "column", "metric", "method", "mean", "reason"])
    return frame.drop_duplicates(ignore_index=True)
