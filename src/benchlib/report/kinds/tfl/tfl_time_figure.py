"""Score vs measured wall-clock time, one point per method (TFL Figure 2: PACS OOF accuracy vs
wall-clock time).

y: the mean test metric over the scope's clients (default OOF), averaged over seeds per
experiment, then over the experiments (for a leave-one-domain-out grid: the average over the
held-out domains, Table 1's "Avg." column). x: the cells' wall-clock time (sum of their round
times, :mod:`tfl_runs`), averaged over all the method's cells. Config entry::

    reports:
      tfl_fig2:
        kind: tfl_time_figure
        experiments: [tfl_pacs__held_out_0_1_2_3_4, tfl_pacs__held_out_5_6_7_8_9]
        methods: [fedavg, fedprox, drfa, fedsr, tfl]
        metric: accuracy
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Params
from benchlib.report.base import register_kind, required_param
from benchlib.report.figures import pyplot
from benchlib.report.kinds.common.history import RunsFigure
from benchlib.report.kinds.tfl.runs import (
    NAMES_PARAM,
    methods_params,
    methods_spec,
    scope_mean,
    scoped_runs,
    score_label,
    timed_inputs,
    timed_runs,
)
from benchlib.report.statistics.table import MetricDisplay

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig


@register_kind
class TflTimeFigure(RunsFigure):
    name = "tfl_time_figure"
    params = Params(
        methods_params(
            {"experiments": required_param(NAMES_PARAM, "the cells' experiments")}, "accuracy"
        )
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        runs, scope = scoped_runs(config, name, params["experiments"], params)
        display = MetricDisplay.resolve(params["metric"])
        return methods_spec(name, params, config, display, runs, scope=scope)

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return timed_inputs(spec)

    def points(self, spec: dict[str, Any], inputs: list[Path]) -> dict[str, tuple[float, float]]:
        """method id -> (mean wall-clock seconds, score averaged as described above; unscaled)."""
        import numpy as np

        timed = timed_runs(spec, inputs, "figure")
        out = {}
        for method_id, runs in timed.items():
            per_experiment: dict[str, list[float]] = {}
            for t in runs:
                value = scope_mean(t.metrics, spec["scope"], spec["metric"], t.where)
                per_experiment.setdefault(t.run["experiment"], []).append(value)
            score = float(np.mean([np.mean(v) for v in per_experiment.values()]))
            out[method_id] = (float(np.mean([t.seconds for t in runs])), score)
        return out

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        plt = pyplot()
        display = MetricDisplay.from_spec(spec)
        points = self.points(spec, inputs)
        fig, ax = plt.subplots(figsize=(5.0, 3.6))
        for method_id, label in spec["methods"]:
            x, y = points[method_id]
            ax.scatter([x], [display.scale(y)], s=60, label=label, zorder=2)
            ax.annotate(label, (x, display.scale(y)), textcoords="offset points", xytext=(5, 4),
                        fontsize=8)  # fmt: skip
        ax.set_xlabel("wall-clock time per run (s)")
        ax.set_ylabel(score_label(display, spec["scope"]))
        ax.grid(alpha=0.3)
        ax.set_title(spec["title"], fontsize=10)
        fig.tight_layout()
        return fig
