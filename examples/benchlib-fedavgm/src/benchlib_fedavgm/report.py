"""``worst_client``: a table kind. Per method and k, the mean over clients and the worst client's
final test metric (each client's value averaged over seeds first), from one malfunction's cells.

Imported by the declarations module in every benchlib process, Snakemake's parse included, so
pandas is imported inside ``render`` only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.io import write_text_atomic
from benchlib.report.base import (
    ReportConfig,
    ReportKind,
    check_experiments,
    check_malfunctions,
    check_outputs,
    method_rows,
    register_kind,
    required_param,
)
from benchlib.report.statistics.table import read_collected, table_rows


@register_kind
class WorstClient(ReportKind):
    name = "worst_client"
    output = "table"  # writes tables/<name>.tex
    params = Params(
        {
            "experiment": required_param({"type": "string"}, "an experiment of the config"),
            "malfunction": required_param({"type": "string"}, "one of its malfunctions"),
            "metric": Param({"type": "string"}, "accuracy", "the collected test_<metric>"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        check_experiments(config, [params["experiment"]])
        check_malfunctions(config, params["experiment"], [params["malfunction"]])
        return {
            "name": name,
            "experiment": params["experiment"],
            "malfunction": params["malfunction"],
            "metric": params["metric"],
            "methods": method_rows(config, params["experiment"]),  # [[id, label]], row order
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [layout.collected_csv(spec["experiment"], spec["malfunction"])]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        check_outputs(self, outputs)
        rows = table_rows(read_collected(inputs), spec["experiment"], spec["malfunction"])
        column = f"test_{spec['metric']}"
        per_client = rows.groupby(["method_id", "k", "client"])[column].mean().reset_index()
        ks = sorted(per_client["k"].unique())
        lines = [
            "\\begin{tabular}{l" + "c" * len(ks) + "}",
            "method & " + " & ".join(f"k={k}" for k in ks) + " \\\\",
            "\\hline",
        ]
        for method_id, label in spec["methods"]:
            cells = []
            for k in ks:
                values = per_client[(per_client["method_id"] == method_id) & (per_client["k"] == k)]
                mean, worst = 100 * values[column].mean(), 100 * values[column].min()
                cells.append("-" if values.empty else f"{mean:.1f} / {worst:.1f}")
            lines.append(f"{label} & " + " & ".join(cells) + " \\\\")
        lines.append("\\end{tabular}")
        write_text_atomic(outputs[0], "\n".join(lines) + "\n")
