"""TFL-style tables: in-federation (IF) and out-of-federation (OOF) results side by side.

Each entry of ``rows`` names an experiment and a scope: ``if`` scores the federation's clients
(metrics.json ``clients``), ``oof`` the held-out clients that never trained
(``held_out_clients``). A value is the mean over the scope's clients of their final test metric,
averaged over seeds (shown ``mean $\\pm$ std`` across seeds when there are several). Layouts:
``columns: methods`` (TFL Tables 4-5: one row per entry, one column per method) or ``columns:
rows`` (Tables 1, 9: methods as rows, one column per entry, plus the average). Numbers quoted
from the paper (``quoted: {entry label: {method id: value}}``) appear in their own block,
marked as quoted, never mixed with ours. Config entry::

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
from typing import TYPE_CHECKING, Any, ClassVar

from benchlib import __version__
from benchlib.errors import require
from benchlib.report.base import ReportKind, check_experiments, check_outputs, register_kind
from benchlib.report.stats import METRIC_PATTERN, MetricDisplay

if TYPE_CHECKING:
    from benchlib.config import Config

SCOPES = {"if": "clients", "oof": "held_out_clients"}


def cell_value(metrics: dict[str, Any], scope: str, column: str, where: str) -> float:
    """Mean of ``column`` over the scope's clients of one metrics.json.

    Clients whose value is undefined (``null``: e.g. ROC-AUC of a test set holding one class, as
    small eICU hospitals have) are left out; at least one client must have a value.
    """
    key = SCOPES[scope]
    clients = metrics.get(key) or []
    require(bool(clients), f"{where} has no {key}; an OOF row needs held-out clients (held_out)")
    require(all(column in c for c in clients), f"{where}: {column} is missing")
    values = [c[column] for c in clients if c[column] is not None]
    require(bool(values), f"{where}: {column} is undefined or not finite for every client")
    return float(sum(values) / len(values))


@register_kind
class TflTable(ReportKind):
    name = "tfl_table"
    output = "table"
    required = ("methods", "rows")
    params: ClassVar[dict[str, Any]] = {
        "metric": {"type": "string", "pattern": METRIC_PATTERN},
        "percent": {"type": "boolean"},
        "decimals": {"type": "integer", "minimum": 0},
        "metric_label": {"type": "string"},
        "methods": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "rows": {
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
        "columns": {"enum": ["methods", "rows"]},
        "average": {"type": "boolean"},
        "title": {"type": "string"},
        "caption_note": {"type": "string"},
        "quoted": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": {"type": "number"}},
        },
    }

    def spec(self, name: str, params: dict[str, Any], config: Config) -> dict[str, Any]:
        rows = [dict(r) for r in params["rows"]]
        check_experiments(config, sorted({r["experiment"] for r in rows}))
        for row in rows:
            exp = config.experiments[row["experiment"]]
            missing = [m for m in params["methods"] if m not in exp["methods"]]
            require(
                not missing,
                f"reports.{name}: experiment {row['experiment']} has no methods {missing}",
            )
            if row["scope"] == "oof":
                held = config.datasets[exp["dataset"]].get("held_out", [])
                require(
                    bool(held),
                    f"reports.{name}: row {row['label']!r} is OOF but experiment "
                    f"{row['experiment']} holds out no clients; set its dataset's held_out",
                )
        cells: dict[str, list[str]] = {}
        for experiment in sorted({r["experiment"] for r in rows}):
            for cell in config.cells(experiment):
                if cell.method in params["methods"]:
                    cells.setdefault(f"{experiment}/{cell.method}", []).append(
                        f"{cell.run_dir}/metrics.json"
                    )
        display = MetricDisplay.resolve(
            params.get("metric", "accuracy"),
            params.get("percent"),
            params.get("decimals"),
            params.get("metric_label"),
        )
        quoted = params.get("quoted", {})
        labels = {r["label"] for r in rows}
        unknown = sorted(set(quoted) - labels)
        require(not unknown, f"reports.{name}: quoted names unknown rows {unknown}")
        return {
            "name": name,
            **display.as_spec(),
            "methods": [[m, config.method_label(m)] for m in params["methods"]],
            "rows": rows,
            "columns": params.get("columns", "methods"),
            "average": bool(params.get("average", params.get("columns") == "rows")),
            "cells": cells,
            "title": params.get("title", name),
            "caption_note": params.get("caption_note", ""),
            "quoted": quoted,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [path for key in sorted(spec["cells"]) for path in spec["cells"][key]]

    def values(self, spec: dict[str, Any], inputs: list[Path]) -> dict[tuple[str, str], list]:
        """(row label, method id) -> per-seed values."""
        import json

        by_path = {str(p): p for p in inputs}
        found: dict[tuple[str, str], list[float]] = {}
        display = MetricDisplay.from_spec(spec)
        for row in spec["rows"]:
            for method_id, _ in spec["methods"]:
                paths = spec["cells"].get(f"{row['experiment']}/{method_id}", [])
                require(bool(paths), f"table {spec['name']}: no cells of {method_id}")
                values = []
                for path in paths:
                    local = by_path.get(path, Path(path))
                    require(local.is_file(), f"{local} not found; run its cell first")
                    metrics = json.loads(local.read_text())
                    values.append(cell_value(metrics, row["scope"], display.column, str(local)))
                found[(row["label"], method_id)] = values
        return found

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import numpy as np

        from benchlib.io import write_text_atomic
        from benchlib.report.latex import render_template

        check_outputs(self, outputs)
        display = MetricDisplay.from_spec(spec)
        values = self.values(spec, inputs)
        d = display.decimals

        def show(vals: list[float]) -> str:
            mean = display.scale(float(np.mean(vals)))
            if len(vals) == 1:
                return f"{mean:.{d}f}"
            return f"{mean:.{d}f} $\\pm$ {display.scale(float(np.std(vals))):.{d}f}"

        def quoted(label: str, method_id: str) -> str:
            value = spec["quoted"].get(label, {}).get(method_id)
            return "--" if value is None else f"{value:g}"

        methods, rows = spec["methods"], spec["rows"]
        if spec["columns"] == "methods":
            header = [label for _, label in methods]
            body = [
                {
                    "block": row.get("block", ""),
                    "label": row["label"],
                    "cells": [show(values[(row["label"], m)]) for m, _ in methods],
                }
                for row in rows
            ]
            paper = [
                {"label": row["label"], "cells": [quoted(row["label"], m) for m, _ in methods]}
                for row in rows
                if row["label"] in spec["quoted"]
            ]
        else:
            header = [row["label"] for row in rows] + (["Avg."] if spec["average"] else [])
            body, paper = [], []
            for method_id, label in methods:
                means = [float(np.mean(values[(row["label"], method_id)])) for row in rows]
                cells = [show(values[(row["label"], method_id)]) for row in rows]
                if spec["average"]:
                    cells.append(f"{display.scale(float(np.mean(means))):.{d}f}")
                body.append({"block": "", "label": label, "cells": cells})
                if any(method_id in spec["quoted"].get(r["label"], {}) for r in rows):
                    cited = [quoted(r["label"], method_id) for r in rows]
                    paper.append({"label": label, "cells": cited + ["--"] * spec["average"]})
        seeds = max(len(v) for v in values.values())
        text = render_template(
            "tfl_table.tex.j2",
            version=__version__,
            name=spec["name"],
            title=spec["title"],
            metric_label=display.label,
            percent=display.percent,
            seeds=seeds,
            note=spec["caption_note"],
            corner="" if spec["columns"] == "methods" else "Method",
            header=header,
            rows=body,
            paper=paper,
        )
        write_text_atomic(outputs[0], text)
