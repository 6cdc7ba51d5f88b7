"""Final metrics per method (the worked example of docs/develop/architecture.md, "Adding a table or
figure kind"): methods as rows, one column per per-client test metric, cells ``mean $\\pm$ std``
across clients for one (malfunction, k) of an experiment. Config entry::

    reports:
      mnist5k_metrics_k2:
        kind: metrics_table
        experiment: mnist5k
        malfunction: ana
        k: 2
        metrics: [accuracy, f1_macro]
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib import __version__
from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_malfunctions,
    check_outputs,
    derived_param,
    experiment_title,
    method_rows,
    register_kind,
    required_param,
)
from benchlib.report.statistics.table import METRIC_PATTERN, MetricDisplay

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig


@register_kind
class MetricsTable(ReportKind):
    name = "metrics_table"
    output = "table"
    params = Params(
        {
            "experiment": required_param({"type": "string"}, "an experiment of the config"),
            "malfunction": required_param({"type": "string"}, "one of its malfunctions"),
            "k": required_param({"type": "integer", "minimum": 0}, "one of its k"),
            "metrics": Param(
                {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"type": "string", "pattern": METRIC_PATTERN},
                },
                ["accuracy"],
                "columns, each shown with its default display",
            ),
            "title": derived_param({"type": "string"}, "caption title", "the experiment's title"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiment, malfunction, k = params["experiment"], params["malfunction"], params["k"]
        check_experiments(config, [experiment])
        check_malfunctions(config, experiment, [malfunction])
        exp = config.experiments[experiment]
        require(k in exp["k"], f"experiment {experiment} has no k={k}; choose one of {exp['k']}")
        title = (
            params["title"] if params["title"] is not None else experiment_title(config, experiment)
        )
        return {
            "name": name,
            "experiment": experiment,
            "malfunction": malfunction,
            "k": k,
            "metrics": params["metrics"],
            "methods": method_rows(config, experiment),
            "clients": config.datasets[exp["dataset"]]["clients"],
            "title": title,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [layout.collected_csv(spec["experiment"], spec["malfunction"])]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        from benchlib.primitives.io import write_text_atomic
        from benchlib.report.latex import render_template
        from benchlib.report.statistics.table import (
            DIVERGED_MARK,
            check_metric,
            diverged_note,
            summarise,
            table_rows,
        )

        check_outputs(self, outputs)
        rows = table_rows(pd.read_csv(inputs[0]), spec["experiment"], spec["malfunction"])
        rows = rows[rows["k"] == spec["k"]]
        require(not rows.empty, f"table {spec['name']}: no collected results at k={spec['k']}")
        displays = [MetricDisplay.resolve(metric) for metric in spec["metrics"]]
        body = []
        diverged = 0
        for method_id, label in spec["methods"]:
            cells = []
            for display in displays:
                check_metric(rows, display.metric, f"table {spec['name']}")
                stats = summarise(rows[rows["method_id"] == method_id], metric=display.metric)
                require(len(stats) == 1, f"table {spec['name']}: no results for {method_id}")
                cell = display.mean_std(stats["mean"].iloc[0], stats["std"].iloc[0])
                cells.append(cell + (DIVERGED_MARK if stats["diverged"].iloc[0] else ""))
            diverged += int(stats["diverged"].iloc[0])  # the method's cells, counted once
            body.append({"label": label, "cells": cells})
        columns = [{"label": d.label, "percent": d.percent} for d in displays]
        text = render_template(
            "metrics_table.tex.j2",
            version=__version__,
            name=spec["name"],
            experiment=spec["experiment"],
            malfunction=spec["malfunction"],
            k=spec["k"],
            title=spec["title"],
            num_clients=spec["clients"],
            columns=columns,
            rows=body,
            diverged_note=diverged_note(diverged),
        )
        write_text_atomic(outputs[0], text)
