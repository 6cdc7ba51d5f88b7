"""TFL Table 6 style: each method's score next to its measured wall-clock time.

One row per method of one experiment: the scope's test metric (default OOF), scored as every TFL
table scores it (``pooling: pooled``, the default: the metric of the scope's pooled predictions,
so no hospital is dropped for an undefined ROC-AUC; ``clients``: the mean over the scope's
clients), the cell's wall-clock time (sum of its round times, :mod:`tfl_runs`) and the time per
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
from typing import TYPE_CHECKING, Any

from benchlib import __version__
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import ReportKind, check_outputs, register_kind, required_param
from benchlib.report.kinds.tfl.runs import (
    POOLINGS,
    SCOPE_NAMES,
    cell_value,
    methods_params,
    methods_spec,
    scoped_runs,
    seed_mean_std,
    timed_inputs,
    timed_runs,
)
from benchlib.report.statistics.table import MetricDisplay

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig


@register_kind
class TflCostTable(ReportKind):
    name = "tfl_cost_table"
    output = "table"
    params = Params(
        {
            **methods_params(
                {"experiment": required_param({"type": "string"}, "the cells' experiment")},
                "roc_auc",
                decimals=Param({"type": "integer", "minimum": 0}, 2, "decimals of the metric"),
            ),
            "caption_note": Param({"type": "string"}, "", "a sentence added to the caption"),
            "pooling": Param(
                {"enum": list(POOLINGS)},
                "pooled",
                "pooled: the metric of the scope's pooled predictions (as tfl_table scores the "
                "same cells); clients: the mean of the scope's per-client metrics",
            ),
            "quoted": Param(
                {
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
                {},
                "method id -> the paper's {value, std, seconds}, shown in a separate block",
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiment, methods = params["experiment"], params["methods"]
        runs, scope = scoped_runs(config, name, [experiment], params)
        quoted = params["quoted"]
        unknown = sorted(set(quoted) - set(methods))
        require(not unknown, f"reports.{name}: quoted names methods not in the table: {unknown}")
        display = MetricDisplay.resolve(params["metric"], None, params["decimals"], None)
        return {
            **methods_spec(name, params, config, display, runs, scope=scope),
            "caption_note": params["caption_note"],
            "pooling": params["pooling"],
            "quoted": quoted,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return timed_inputs(spec)

    def values(self, spec: dict[str, Any], inputs: list[Path]) -> dict[str, dict[str, list[float]]]:
        """method id -> {"value", "seconds", "per_round"}: one entry per seed; "estimated"
        counts the cells whose total is estimated from a resumed run."""
        timed = timed_runs(spec, inputs, "table")
        return {
            method: {
                "value": [
                    cell_value(
                        t.metrics, spec["scope"], f"test_{spec['metric']}", t.where, spec["pooling"]
                    )
                    for t in runs
                ],
                "seconds": [t.seconds for t in runs],
                "per_round": [t.seconds / t.rounds for t in runs],
                "estimated": [float(t.estimated) for t in runs],
            }
            for method, runs in timed.items()
        }

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.primitives.io import write_text_atomic
        from benchlib.report.latex import render_template

        check_outputs(self, outputs)
        display = MetricDisplay.from_spec(spec)
        values = self.values(spec, inputs)

        def show(vals: list[float], scale: float, decimals: int) -> str:
            mean, std = seed_mean_std(vals)
            if len(vals) == 1:
                return f"{scale * mean:.{decimals}f}"
            return f"{scale * mean:.{decimals}f} $\\pm$ {scale * std:.{decimals}f}"

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
            scope=SCOPE_NAMES[spec["scope"]],
            seeds=seeds,
            estimated=estimated,
            note=spec["caption_note"],
            rows=rows,
            paper=paper,
        )
        write_text_atomic(outputs[0], text)
