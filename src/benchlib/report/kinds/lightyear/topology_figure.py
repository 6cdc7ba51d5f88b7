"""Topology comparison (LIGHTYEAR Figures 5 and 6): the mean client test metric vs. the number of
malfunctioning clients k for star FedAvg, P2P FedAvg and LIGHTYEAR, one panel per malfunction.

Each line is a (experiment, method) ``series``, so the P2P FedAvg cells may live in an experiment
of their own beside the table experiment (no extra row in the paper's tables). Config entry::

    reports:
      lightyear_fig5:
        kind: topology_figure
        series: [{experiment: femnist, method: fedavg},
                 {experiment: femnist_topology, method: p2p_fedavg},
                 {experiment: femnist, method: lightyear}]
        malfunctions: [ana, sfa, random]

Series of several datasets (e.g. Figure 6: ultrasound and X-ray) get one row of panels per
dataset. Reads the collected CSVs of the series' experiments; values as in the tables (per-client
final test metric, mean over all clients).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_malfunctions,
    check_outputs,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.kinds.common.history import check_methods
from benchlib.report.statistics.table import METRIC_PARAMS, MetricDisplay, metric_display

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

NAMES = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}}
SERIES = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["experiment", "method"],
        "properties": {
            "experiment": {"type": "string"},
            "method": {"type": "string"},
            "label": {"type": "string"},
        },
    },
}


def topology_frame(collected: pd.DataFrame, spec: dict[str, Any]) -> pd.DataFrame:
    """Long frame (experiment = the series' dataset row, malfunction, method label, k, value,
    spread) of every series and panel."""
    import pandas as pd

    from benchlib.report.statistics.table import check_metric, summarise, table_rows

    display = MetricDisplay.from_spec(spec)
    check_metric(collected, display.metric, "figure")
    parts = []
    for series in spec_value(spec, "series"):
        for malfunction in spec_value(spec, "malfunctions"):
            rows = table_rows(collected, series["experiment"], malfunction)
            stats = summarise(rows[rows["method_id"] == series["method"]], metric=display.metric)
            parts.append(
                stats.assign(
                    experiment=series["row"],
                    malfunction=malfunction.upper(),
                    method=series["label"],
                    value=display.scale(stats["mean"]),
                    spread=display.scale(stats["std"]),
                )
            )
    frame = pd.concat(parts, ignore_index=True)
    require(not frame.empty, "no collected results for the topology figure's series")
    return frame


@register_kind
class TopologyFigure(ReportKind):
    name = "topology_figure"
    output = "figure"
    params = Params(
        {
            "series": required_param(SERIES, "one line each: experiment, method (, label)"),
            "malfunctions": required_param(NAMES, "one panel each"),
            "title": Param({"type": "string"}, "Star vs. P2P topology", "figure title"),
            "std": Param({"type": "boolean"}, False, "draw a +-1 std band across clients"),
            **METRIC_PARAMS,
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        series = []
        for entry in params["series"]:
            check_experiments(config, [entry["experiment"]])
            check_methods(config, entry["experiment"], [entry["method"]])
            check_malfunctions(config, entry["experiment"], params["malfunctions"])
            label = entry.get("label", config.method_label(entry["method"]))
            dataset = config.experiment_dataset(entry["experiment"])
            row = config.datasets[dataset]["label"]
            series.append({**entry, "label": label, "row": row})
        return {
            "name": name,
            "series": series,
            "malfunctions": list(params["malfunctions"]),
            "title": params["title"],
            "std": params["std"],
            **metric_display(params).as_spec(),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        experiments = dict.fromkeys(s["experiment"] for s in spec["series"])
        return [
            layout.collected_csv(experiment, malfunction)
            for experiment in experiments
            for malfunction in spec["malfunctions"]
        ]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        from benchlib.report.kinds.common.robustness_figure import plot_robustness

        check_outputs(self, outputs)
        require(bool(inputs), "topology_figure reads collected CSVs; pass --collected CSV...")
        collected = pd.concat([pd.read_csv(p) for p in inputs], ignore_index=True)
        collected = collected.drop_duplicates(ignore_index=True)
        frame = topology_frame(collected, spec)
        plot_robustness(
            frame,
            spec_value(spec, "title"),
            outputs[0],
            outputs[1],
            MetricDisplay.from_spec(spec),
            spec["std"],
            [s["label"] for s in spec["series"]],
        )
