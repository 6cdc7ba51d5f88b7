"""TFL-style tables: in-federation (IF) and out-of-federation (OOF) results side by side.

Each entry of ``rows`` names an experiment and a scope: ``if`` scores the federation's clients
(metrics.json ``clients``), ``oof`` the held-out clients that never trained
(``held_out_clients``). A value is, per seed, the scope's final test metric - ``pooling: pooled``
(default, as the TFL paper scores): of the scope's pooled predictions (metrics.json ``pooled``:
the global accuracy, one ROC-AUC over all held-out hospitals' patients, the MSE over all
windows); ``pooling: clients``: the mean over the scope's clients of their metric - averaged
over seeds (shown ``mean $\\pm$ std`` across seeds when there are several). ``best_round`` reads
the per-round client metrics (client means) whatever ``pooling``. Layouts:
``columns: methods`` (TFL Tables 4-5: one row per entry, one column per method) or ``columns:
rows`` (Tables 1, 9: methods as rows, one column per entry, plus the average). Numbers quoted
from the paper (``quoted: {entry label: {method id: value}}``) appear in their own block,
marked as quoted, never mixed with ours.

``centralized`` lists methods (e.g. ``erm``) shown before the federated ones as their own
"Centralized" column group (``columns: methods``) or row block (``columns: rows``).
``best_round: true`` (TFL Table 2, ``columns: methods``) shows per method the best round's value
instead of the final one, the round, and (federated methods) the communicated parameters up to
it, from the cells' per-round test metrics (``training.round_metrics``). A quoted value is a
number or ``{value, std, round, c_params}`` (all but ``value`` optional). Config entry::

    reports:
      tfl_table4:
        kind: tfl_table
        metric: mse
        methods: [tfl_fedavg, tfl_fedprox, tfl_drfa, tfl]
        rows:
          - {label: "E(24) -> W(24)", experiment: tpt48_ew, scope: oof, block: OOF}
          - {label: "E(24) -> E(24)", experiment: tpt48_ew, scope: if, block: IF}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib import __version__
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_outputs,
    derived_param,
    register_kind,
    required_param,
)
from benchlib.report.kinds.tfl.runs import POOLINGS, SCOPES, cell_value, round_means
from benchlib.report.statistics.table import (
    DIVERGED_MARK,
    METRIC_PATTERN,
    MetricDisplay,
    diverged_note,
)

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig

LOWER_IS_BETTER = frozenset({"mse", "mae"})  # the best round of these is the lowest


def c_params_millions(best: int, clients: int, parameters: int, transmissions: int) -> float:
    """Communicated parameters (millions) up to the 0-based round ``best``, in the TFL paper's
    count: (best + 1) rounds x ``clients`` federation clients x ``parameters`` per model x
    ``transmissions`` models each client sends per round.

    Derived from the paper's Table 2: FedAvg and FedProx 15.66M at round 6, FedSR 20.88M at
    round 8, i.e. 2.61M per round (15.66 / 6 = 20.88 / 8); DRFA and TFL 10.44M at round 2, i.e.
    5.22M per round, twice as much. So the paper counts one model per federation client and
    round (the same unit for every method, whichever clients a method samples), twice for the
    two distributionally robust methods, whose dual step exchanges a second model per round
    (DRFA's snapshot model, TFL's global model for the clients' losses): transmissions 2 for
    DRFA and TFL, 1 otherwise (the report's ``transmissions``). The 2.61M unit would be 58
    clients x 45k parameters; the paper does not give its eICU MLP's size.
    """
    return (best + 1) * clients * parameters * transmissions / 1e6


def best_round(curves: list[list[float]], metric: str, where: str) -> int:
    """0-based round whose mean over the seeds' ``curves`` is best (rounds without any defined
    value are skipped; the earliest of equals wins)."""
    import warnings

    import numpy as np

    require(len({len(c) for c in curves}) == 1, f"{where}: the seeds ran different rounds")
    with warnings.catch_warnings():  # an all-undefined round is NaN, which nanargmin skips
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(np.asarray(curves, dtype=float), axis=0)
    require(not bool(np.isnan(mean).all()), f"{where}: no round has a defined value")
    sign = 1.0 if metric in LOWER_IS_BETTER else -1.0
    return int(np.nanargmin(sign * mean))


QUOTED_VALUE = {
    "oneOf": [
        {"type": "number"},
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["value"],
            "properties": {
                "value": {"type": "number"},
                "std": {"type": "number", "minimum": 0},
                "round": {"type": "integer", "minimum": 1},
                "c_params": {"type": "number", "minimum": 0},
            },
        },
    ]
}


@register_kind
class TflTable(ReportKind):
    name = "tfl_table"
    output = "table"
    params = Params(
        {
            "metric": Param(
                {"type": "string", "pattern": METRIC_PATTERN}, "accuracy", "the cells' test metric"
            ),
            "percent": derived_param(
                {"type": "boolean"}, "show 100 x value", "for metrics in [0, 1]"
            ),
            "decimals": derived_param(
                {"type": "integer", "minimum": 0}, "decimals shown", "1 in percent, else 3"
            ),
            "metric_label": derived_param(
                {"type": "string"}, "the metric's name in the caption", "its usual name"
            ),
            "methods": required_param(
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "the federated methods, in this order",
            ),
            "centralized": Param(
                {"type": "array", "items": {"type": "string"}},
                [],
                "methods shown first as their own Centralized group (e.g. erm)",
            ),
            "best_round": Param(
                {"type": "boolean"},
                False,
                "per method the best round's value, the round and the c-params (columns: methods)",
            ),
            "pooling": derived_param(
                {"enum": list(POOLINGS)},
                "pooled: the metric of the scope's pooled predictions (the paper's); clients: the "
                "mean of the scope's per-client metrics (the only reading for segmentation, "
                "whose cells record no pooled scores)",
                "clients for segmentation, else pooled",
            ),
            "transmissions": Param(
                {"type": "object", "additionalProperties": {"type": "integer", "minimum": 1}},
                {},
                "federated method id -> models each client sends per round (c-params; default 1)",
            ),
            "rows": required_param(
                {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["label", "experiment", "scope"],
                        "properties": {
                            "label": {"type": "string"},
                            "experiment": {"type": "string"},
                            "scope": {"enum": list(SCOPES)},
                            "block": {"type": "string"},
                        },
                    },
                },
                "table entries: {label, experiment, scope (if or oof)[, block]}",
            ),
            "columns": Param(
                {"enum": ["methods", "rows"]},
                "methods",
                "methods: one column per method; rows: one column per entry",
            ),
            "average": derived_param(
                {"type": "boolean"}, "add the average over the entries", "true with columns: rows"
            ),
            "title": derived_param({"type": "string"}, "caption title", "the report's name"),
            "caption_note": Param({"type": "string"}, "", "a sentence added to the caption"),
            "quoted": Param(
                {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "additionalProperties": QUOTED_VALUE,
                    },
                },
                {},
                "entry label -> method id -> the paper's value, shown in a separate block",
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        rows = [{"block": "", **r} for r in params["rows"]]  # no block heading by default
        centralized = list(params["centralized"])
        methods = centralized + list(params["methods"])
        both = sorted(set(centralized) & set(params["methods"]))
        require(not both, f"reports.{name}: {both} are in both centralized and methods")
        check_experiments(config, sorted({r["experiment"] for r in rows}))
        for row in rows:
            exp = config.experiments[row["experiment"]]
            missing = [m for m in methods if m not in exp["methods"]]
            require(
                not missing,
                f"reports.{name}: experiment {row['experiment']} has no methods {missing}",
            )
            if row["scope"] == "oof":
                held = config.datasets[exp["dataset"]]["held_out"]
                require(
                    bool(held),
                    f"reports.{name}: row {row['label']!r} is OOF but experiment "
                    f"{row['experiment']} holds out no clients; set its dataset's held_out",
                )
        cells: dict[str, list[str]] = {}
        for experiment in sorted({r["experiment"] for r in rows}):
            for cell in config.cells(experiment):
                if cell.method in methods:
                    cells.setdefault(f"{experiment}/{cell.method}", []).append(cell.metrics_path)
        metric = params["metric"]
        display = MetricDisplay.resolve(
            metric, params["percent"], params["decimals"], params["metric_label"]
        )
        best = bool(params["best_round"])
        segmentation = any(
            config.datasets[config.experiments[r["experiment"]]["dataset"]]["task"]
            == "segmentation"
            for r in rows
        )
        pooling = params["pooling"]
        if pooling is None:
            pooling = "clients" if segmentation else "pooled"
        require(
            not (segmentation and pooling == "pooled"),
            f"reports.{name}: segmentation cells record no pooled scores; set pooling: clients",
        )
        transmissions = dict(params["transmissions"])
        if best:
            self._check_round_metrics(name, params, rows, metric, config)
        unknown = sorted(set(transmissions) - set(params["methods"]))
        require(not unknown, f"reports.{name}: transmissions names no federated method {unknown}")
        quoted = params["quoted"]
        labels = {r["label"] for r in rows}
        unknown = sorted(set(quoted) - labels)
        require(not unknown, f"reports.{name}: quoted names unknown rows {unknown}")
        average = params["average"]
        if average is None:
            average = params["columns"] == "rows"
        return {
            "name": name,
            **display.as_spec(),
            "methods": [[m, config.method_label(m)] for m in params["methods"]],
            "centralized": [[m, config.method_label(m)] for m in centralized],
            "best_round": best,
            "pooling": pooling,
            "transmissions": transmissions,
            "rows": rows,
            "columns": params["columns"],
            "average": bool(average),
            "cells": cells,
            "title": params["title"] if params["title"] is not None else name,
            "caption_note": params["caption_note"],
            "quoted": quoted,
        }

    @staticmethod
    def _check_round_metrics(
        name: str, params: dict[str, Any], rows: list[dict], metric: str, config: ReportConfig
    ) -> None:
        """``best_round`` needs methods as columns and per-round values of the metric."""
        require(
            params["columns"] == "methods",
            f"reports.{name}: best_round needs columns: methods",
        )
        for row in rows:
            dataset = config.experiments[row["experiment"]]["dataset"]
            tracked = config.datasets[dataset]["training"]["round_metrics"]
            require(
                metric in tracked,
                f"reports.{name}: best_round needs per-round {metric}; add it to "
                f"datasets.{dataset}.training.round_metrics",
            )

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [path for key in sorted(spec["cells"]) for path in spec["cells"][key]]

    @staticmethod
    def _metrics_of(spec: dict[str, Any], inputs: list[Path]):
        """Yield (row, method id, per-seed [(path, metrics.json)]) for every table entry."""
        import json

        by_path = {str(p): p for p in inputs}
        for row in spec["rows"]:
            for method_id, _ in all_methods(spec):
                paths = spec["cells"].get(f"{row['experiment']}/{method_id}", [])
                require(bool(paths), f"table {spec['name']}: no cells of {method_id}")
                found = []
                for path in paths:
                    local = by_path.get(path, Path(path))
                    require(local.is_file(), f"{local} not found; run its cell first")
                    found.append((local, json.loads(local.read_text())))
                yield row, method_id, found

    def diverged(self, spec: dict[str, Any], inputs: list[Path]) -> dict[tuple[str, str], int]:
        """(row label, method id) -> how many of its cells (seeds) diverged: their models went
        non-finite (``history.nonfinite`` of metrics.json)."""
        return {
            (row["label"], method_id): sum(
                bool(metrics.get("history", {}).get("nonfinite")) for _, metrics in seeds
            )
            for row, method_id, seeds in self._metrics_of(spec, inputs)
        }

    def values(self, spec: dict[str, Any], inputs: list[Path]) -> dict[tuple[str, str], list]:
        """(row label, method id) -> per-seed final values."""
        column = MetricDisplay.from_spec(spec).column
        pooling = spec["pooling"]
        return {
            (row["label"], method_id): [
                cell_value(metrics, row["scope"], column, str(path), pooling)
                for path, metrics in seeds
            ]
            for row, method_id, seeds in self._metrics_of(spec, inputs)
        }

    def best_values(self, spec: dict[str, Any], inputs: list[Path]) -> dict[tuple[str, str], dict]:
        """(row label, method id) -> {values: per-seed values at the best round, round: that
        round (0-based), c_params: communicated parameters up to it in millions, None for a
        centralized method}. The best round is that of the best mean over seeds of the
        per-round scope means (``history.round_metrics``)."""

        centralized = {m for m, _ in spec["centralized"]}
        found = {}
        for row, method_id, seeds in self._metrics_of(spec, inputs):
            where = f"table {spec['name']}, {row['label']}, {method_id}"
            curves = [round_means(m, row["scope"], spec["metric"], str(p)) for p, m in seeds]
            best = best_round(curves, spec["metric"], where)
            values = [c[best] for c in curves]
            require(
                all(v == v for v in values),
                f"{where}: a seed has no defined value in round {best + 1}",
            )
            c_params = None
            if method_id not in centralized:
                sizes = {self._model_size(m, str(p)) for p, m in seeds}
                require(len(sizes) == 1, f"{where}: the seeds differ in clients or model size")
                ((clients, parameters),) = sizes
                sends = int(spec["transmissions"].get(method_id, 1))
                c_params = c_params_millions(best, clients, parameters, sends)
            found[(row["label"], method_id)] = {
                "values": values,
                "round": best,
                "c_params": c_params,
            }
        return found

    @staticmethod
    def _model_size(metrics: dict[str, Any], where: str) -> tuple[int, int]:
        """(federation clients, parameters of one transmitted model) of one cell."""
        require(
            "transmitted_parameters" in metrics,
            f"{where} does not record transmitted_parameters (the size of the model a client "
            "sends), which c-params need; rerun the cell with this benchlib",
        )
        return len(metrics["clients"]), int(metrics["transmitted_parameters"])

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.primitives.io import write_text_atomic
        from benchlib.report.latex import render_template

        check_outputs(self, outputs)
        best = bool(spec["best_round"])
        found = self.best_values(spec, inputs) if best else None
        values = (
            {key: entry["values"] for key, entry in found.items()}
            if found is not None
            else self.values(spec, inputs)
        )
        diverged = self.diverged(spec, inputs)
        cells = _Cells(spec, values, found, diverged)
        layout = _by_methods(spec, cells) if spec["columns"] == "methods" else _by_rows(spec, cells)
        sends = spec["transmissions"]
        text = render_template(
            "tfl_table.tex.j2",
            version=__version__,
            name=spec["name"],
            title=spec["title"],
            metric_label=cells.display.label,
            percent=cells.display.percent,
            seeds=max(len(v) for v in values.values()),
            note=spec["caption_note"],
            centralized=[label for _, label in spec["centralized"]],
            best_round=best,
            pooled=spec["pooling"] == "pooled" and not best,
            transmissions=[
                (label, sends[m]) for m, label in spec["methods"] if sends.get(m, 1) != 1
            ]
            if best
            else [],
            columns=sum(h["span"] for h in layout["header"]),
            diverged_note=diverged_note(sum(diverged.values())),
            **layout,
        )
        write_text_atomic(outputs[0], text)


def all_methods(spec: dict[str, Any]) -> list[list[str]]:
    """[method id, label] of the centralized methods, then the federated ones."""
    return [*spec["centralized"], *spec["methods"]]


class _Cells:
    """The shown cells of one (row, method): ours and the paper's, one per sub-column
    (value; with best_round also round and, for federated methods, c-params)."""

    def __init__(
        self,
        spec: dict[str, Any],
        values: dict[tuple[str, str], list[float]],
        found: dict[tuple[str, str], dict] | None,
        diverged: dict[tuple[str, str], int] | None = None,
    ) -> None:
        self.spec, self.values, self.found = spec, values, found
        self.diverged = diverged or {}
        self.display = MetricDisplay.from_spec(spec)
        self.central = {m for m, _ in spec["centralized"]}

    def subcolumns(self, method_id: str) -> list[str]:
        if self.found is None:
            return ["value"]
        return ["value", "round"] + ([] if method_id in self.central else ["c_params"])

    def subheader(self, method_id: str) -> list[str]:
        names = {"value": self.display.label, "round": "round", "c_params": "c-params (M)"}
        return [names[s] for s in self.subcolumns(method_id)]

    def show(self, values: list[float]) -> str:
        import numpy as np

        d, scale = self.display.decimals, self.display.scale
        mean = scale(float(np.mean(values)))
        if len(values) == 1:
            return f"{mean:.{d}f}"
        return f"{mean:.{d}f} $\\pm$ {scale(float(np.std(values))):.{d}f}"

    def ours(self, label: str, method_id: str) -> list[str]:
        mark = DIVERGED_MARK if self.diverged.get((label, method_id)) else ""
        if self.found is None:
            return [self.show(self.values[(label, method_id)]) + mark]
        entry = self.found[(label, method_id)]
        shown = {"value": self.show(entry["values"]) + mark, "round": str(entry["round"] + 1)}
        if entry["c_params"] is not None:
            shown["c_params"] = f"{entry['c_params']:.2f}"
        return [shown[s] for s in self.subcolumns(method_id)]

    def quoted(self, label: str, method_id: str) -> list[str]:
        value = self.spec["quoted"].get(label, {}).get(method_id)
        entry = value if isinstance(value, dict) else {"value": value}
        cited = [
            "--" if entry.get(s) is None else f"{entry[s]:g}" for s in self.subcolumns(method_id)
        ]
        if entry.get("std") is not None:
            cited[0] += f" $\\pm$ {entry['std']:g}"
        return cited


def _by_methods(spec: dict[str, Any], cells: _Cells) -> dict[str, Any]:
    """Template fields of ``columns: methods``: one row per entry, columns per method (under
    Centralized / Federated group headers when there are centralized methods)."""
    methods = all_methods(spec)
    header = [{"label": label, "span": len(cells.subcolumns(m))} for m, label in methods]
    groups = []
    if spec["centralized"]:
        spans = [h["span"] for h in header]
        split = sum(spans[: len(spec["centralized"])])
        groups = [
            {"label": "Centralized", "first": 2, "last": split + 1},
            {"label": "Federated", "first": split + 2, "last": sum(spans) + 1},
        ]
    subheader = []
    if cells.found is not None:
        subheader = [name for m, _ in methods for name in cells.subheader(m)]

    def line(row: dict[str, Any], of) -> list[str]:
        return [c for m, _ in methods for c in of(row["label"], m)]

    body = [
        {"block": row["block"], "label": row["label"], "cells": line(row, cells.ours)}
        for row in spec["rows"]
    ]
    paper = [
        {"label": row["label"], "cells": line(row, cells.quoted)}
        for row in spec["rows"]
        if row["label"] in spec["quoted"]
    ]
    return {"corner": "", "groups": groups, "header": header, "subheader": subheader,
            "rows": body, "paper": paper}  # fmt: skip


def _by_rows(spec: dict[str, Any], cells: _Cells) -> dict[str, Any]:
    """Template fields of ``columns: rows``: one row per method (Centralized and Federated
    blocks when there are centralized methods), one column per entry, optional average."""
    import numpy as np

    rows, display = spec["rows"], cells.display
    header = [{"label": row["label"], "span": 1} for row in rows]
    header += [{"label": "Avg.", "span": 1}] if spec["average"] else []
    body, paper = [], []
    for method_id, label in all_methods(spec):
        values = [cells.values[(row["label"], method_id)] for row in rows]
        shown = [cells.show(v) for v in values]
        if spec["average"]:
            mean = float(np.mean([float(np.mean(v)) for v in values]))
            shown.append(f"{display.scale(mean):.{display.decimals}f}")
        block = ""
        if spec["centralized"]:
            block = "Centralized" if method_id in cells.central else "Federated"
        body.append({"block": block, "label": label, "cells": shown})
        if any(method_id in spec["quoted"].get(r["label"], {}) for r in rows):
            cited = [cells.quoted(r["label"], method_id)[0] for r in rows]
            paper.append({"label": label, "cells": cited + ["--"] * spec["average"]})
    return {"corner": "Method", "groups": [], "header": header, "subheader": [],
            "rows": body, "paper": paper}  # fmt: skip
