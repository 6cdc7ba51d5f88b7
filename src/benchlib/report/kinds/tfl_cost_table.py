"""TFL Table 6 style: each method's score next to its measured wall-clock time.

One row per method of one experiment: the mean test metric over the scope's clients (default
OOF), the cell's wall-clock time (sum of its round times, :mod:`tfl_runs`) and the time per
round, each ``mean $\\pm$ std`` over seeds. Numbers quoted from the paper (``quoted: {method id:
{value, std, seconds}}``) appear in their own block, marked as quoted, never mixed with ours.
Config entry::

    reports:
      tfl_table6:
        kind: tfl_cost_table
        experiment: tfl_eicu
        methods: [fedavg, tfl, tfl_kmeans]
        metric: roc_auc
        quoted: {fedavg: {value: 57.18, std: 0.03, seconds: 120.15}}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from benchlib import __version__
from benchlib.errors import require
from benchlib.report.base import ReportKind, check_outputs, register_kind
from benchlib.report.kinds.tfl_runs import (
    cell_runs,
    check_scope,
    read_json,
    rounds_of,
    scope_mean,
    scope_schema,
    total_seconds,
)
from benchlib.report.stats import METRIC_PATTERN, MetricDisplay

if TYPE_CHECKING:
    from benchlib.config import Config


@register_kind
class TflCostTable(ReportKind):
    name = "tfl_cost_table"
    output = "table"
    required = ("experiment", "methods")
    params: ClassVar[dict[str, Any]] = {
        "experiment": {"type": "string"},
        "methods": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "metric": {"type": "string", "pattern": METRIC_PATTERN},
        "scope": scope_schema(),
        "decimals": {"type": "integer", "minimum": 0},
        "title": {"type": "string"},
        "caption_note": {"type": "string"},
        "quoted": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "value": {"type": "number"},
                    "std": {"type": "number"},
                    "seconds": {"type": "number"},
                },
            },
        },
    }

    def spec(self, name: str, params: dict[str, Any], config: Config) -> dict[str, Any]:
        experiment, methods = params["experiment"], params["methods"]
        runs = cell_runs(config, name, [experiment], methods)
        scope = params.get("scope", "oof")
        check_scope(config, name, experiment, scope)
        quoted = params.get("quoted", {})
        unknown = sorted(set(quoted) - set(methods))
        require(not unknown, f"reports.{name}: quoted names methods not in the table: {unknown}")
        display = MetricDisplay.resolve(
            params.get("metric", "roc_auc"), None, params.get("decimals", 2), None
        )
        return {
            "name": name,
            **display.as_spec(),
            "scope": scope,
            "methods": [[m, config.method_label(m)] for m in methods],
            "runs": runs,
            "title": params.get("title", name),
            "caption_note": params.get("caption_note", ""),
            "quoted": quoted,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [p for run in spec["runs"] for p in (run["path"], run["timing"])]

    def values(self, spec: dict[str, Any], inputs: list[Path]) -> dict[str, dict[str, list[float]]]:
        """method id -> {"value", "seconds", "per_round"}: one entry per seed; "estimated"
        counts the cells whose total is estimated from a resumed run."""
        require(
            len(inputs) == 2 * len(spec["runs"]),
            f"{spec['name']}: expected a metrics.json and a timing.json per run, in spec order",
        )
        found: dict[str, dict[str, list[float]]] = {
            m: {"value": [], "seconds": [], "per_round": [], "estimated": []}
            for m, _ in spec["methods"]
        }
        for i, run in enumerate(spec["runs"]):
            metrics_path, timing_path = Path(inputs[2 * i]), Path(inputs[2 * i + 1])
            metrics = read_json(metrics_path, "metrics file")
            timing = read_json(timing_path, "timing file")
            rounds = rounds_of(metrics)
            require(rounds > 0, f"{metrics_path} records no rounds")
            seconds, estimated = total_seconds(timing, rounds, str(timing_path))
            entry = found[run["method"]]
            entry["value"].append(
                scope_mean(metrics, spec["scope"], spec["metric"], str(metrics_path))
            )
            entry["seconds"].append(seconds)
            entry["per_round"].append(seconds / rounds)
            entry["estimated"].append(float(estimated))
        for method, entry in found.items():
            require(bool(entry["value"]), f"table {spec['name']}: no cells of {method}")
        return found

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import numpy as np

        from benchlib.io import write_text_atomic
        from benchlib.report.latex import render_template

        check_outputs(self, outputs)
        display = MetricDisplay.from_spec(spec)
        values = self.values(spec, inputs)

        def show(vals: list[float], scale: float, decimals: int) -> str:
            mean = scale * float(np.mean(vals))
            if len(vals) == 1:
                return f"{mean:.{decimals}f}"
            return f"{mean:.{decimals}f} $\\pm$ {scale * float(np.std(vals)):.{decimals}f}"

        metric_scale = 100.0 if display.percent else 1.0
        rows, paper = [], []
        for method_id, label in spec["methods"]:
            v = values[method_id]
            rows.append(
                {
                    "label": label,
                    "cells": [
                        show(v["value"], metric_scale, display.decimals),
                        show(v["seconds"], 1.0, 2),
                        show(v["per_round"], 1.0, 3),
                    ],
                }
            )
            cited = spec["quoted"].get(method_id)
            if cited:
                value = "--" if "value" not in cited else f"{cited['value']:g}"
                if "std" in cited and "value" in cited:
                    value += f" $\\pm$ {cited['std']:g}"
                seconds = "--" if "seconds" not in cited else f"{cited['seconds']:g}"
                paper.append({"label": label, "cells": [value, seconds, "--"]})
        seeds = max(len(v["value"]) for v in values.values())
        estimated = sum(int(x) for v in values.values() for x in v["estimated"])
        text = render_template(
            "tfl_cost_table.tex.j2",
            version=__version__,
            name=spec["name"],
            title=spec["title"],
            metric_label=display.label,
            percent=display.percent,
            scope=spec["scope"].upper(),
            seeds=seeds,
            estimated=estimated,
            note=spec["caption_note"],
            rows=rows,
            paper=paper,
        )
        write_text_atomic(outputs[0], text)
