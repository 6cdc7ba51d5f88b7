"""In-federation (IF) vs out-of-federation (OOF) bars per method (TFL Figures 1 and 8).

One panel per entry of ``panels`` (an experiment, e.g. one held-out region of a
leave-one-region-out grid); in each, one pair of bars per method: the mean test metric over the
federation's clients (IF, their own test data) and over the held-out clients (OOF), each the mean
over seeds of the cell's client mean, with the std over seeds as error bar. Config entry::

    reports:
      tfl_fig8:
        kind: tfl_if_oof_figure
        metric: roc_auc
        methods: [fedavg, tfl]
        panels:
          - {label: WEST held out, experiment: tfl_eicu_loro__held_out_58_59_60}
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Params
from benchlib.primitives.errors import require
from benchlib.report.base import register_kind, required_param
from benchlib.report.figures import pyplot
from benchlib.report.kinds.common.history import RunsFigure
from benchlib.report.kinds.tfl.runs import (
    SCOPE_NAMES,
    cell_runs,
    check_scope,
    methods_params,
    methods_spec,
    run_metrics,
    scope_mean,
    score_label,
    seed_mean_std,
)
from benchlib.report.statistics.table import MetricDisplay

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig


def if_oof_values(
    spec: dict[str, Any], inputs: list[Path]
) -> dict[tuple[str, str, str], list[float]]:
    """(panel label, method id, "if"/"oof") -> the per-seed client means."""
    found: dict[tuple[str, str, str], list[float]] = {}
    for run, metrics, where in run_metrics(spec, inputs):
        for scope in SCOPE_NAMES:
            value = scope_mean(metrics, scope, spec["metric"], where)
            found.setdefault((run["panel"], run["method"], scope), []).append(value)
    return found


PANELS = {
    "type": "array",
    "minItems": 1,
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["label", "experiment"],
        "properties": {"label": {"type": "string"}, "experiment": {"type": "string"}},
    },
}


@register_kind
class TflIfOofFigure(RunsFigure):
    name = "tfl_if_oof_figure"
    params = Params(
        methods_params(
            {"panels": required_param(PANELS, "one panel each: {label, experiment}")},
            "roc_auc",
            scope=False,
        )
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        labels = [p["label"] for p in params["panels"]]
        require(len(set(labels)) == len(labels), f"reports.{name}: panel labels must differ")
        runs = []
        for panel in params["panels"]:
            # cell_runs first: it names an unknown experiment before check_scope looks it up
            panel_runs = cell_runs(config, name, [panel["experiment"]], params["methods"])
            check_scope(config, name, panel["experiment"], "oof")
            runs += [{**run, "panel": panel["label"]} for run in panel_runs]
        display = MetricDisplay.resolve(params["metric"])
        return methods_spec(name, params, config, display, runs, panels=labels)

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        import numpy as np

        plt = pyplot()
        display = MetricDisplay.from_spec(spec)
        values = if_oof_values(spec, inputs)
        panels, methods = spec["panels"], spec["methods"]
        fig, axes = plt.subplots(
            1, len(panels), figsize=(1.2 + 0.9 * len(methods) * len(panels), 3.4), sharey=True,
            squeeze=False,
        )  # fmt: skip
        x = np.arange(len(methods))
        width = 0.38
        for ax, panel in zip(axes[0], panels, strict=True):
            for offset, (scope, label) in zip((-width / 2, width / 2), SCOPE_NAMES.items(),
                                               strict=True):  # fmt: skip
                seeds = [values[(panel, m, scope)] for m, _ in methods]
                stats = [seed_mean_std(v) for v in seeds]
                means = [display.scale(mean) for mean, _ in stats]
                stds = [display.scale(std) for _, std in stats]
                ax.bar(x + offset, means, width, yerr=stds if max(len(v) for v in seeds) > 1
                       else None, label=label, color="tab:blue" if scope == "if" else "tab:red",
                       capsize=2)  # fmt: skip
            ax.set_xticks(x, [label for _, label in methods], rotation=30, ha="right")
            ax.set_title(panel, fontsize=9)
        axes[0][0].set_ylabel(score_label(display))
        axes[0][-1].legend(fontsize=8, frameon=False)
        fig.suptitle(spec["title"], fontsize=10)
        fig.tight_layout()
        return fig
