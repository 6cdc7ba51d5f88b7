"""A test metric per communication round, one line per method (TFL Figure 7: ROC-AUC vs round).

Reads the cells' ``history.round_metrics`` (recorded when the dataset's
``training.round_metrics`` names the metric): per round, the mean over the scope's clients
(default OOF, the held-out clients; clients whose value is undefined, e.g. a one-class test set,
are skipped), then the mean over seeds, with the std over seeds as a band. Config entry::

    reports:
      tfl_fig7:
        kind: tfl_round_figure
        experiment: tfl_eicu
        methods: [fedavg, fedprox, drfa, fedsr, tfl]
        metric: roc_auc
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
    by_method,
    methods_params,
    methods_spec,
    round_means,
    run_metrics,
    scoped_runs,
    score_label,
)
from benchlib.report.statistics.table import MetricDisplay

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig


@register_kind
class TflRoundFigure(RunsFigure):
    name = "tfl_round_figure"
    params = Params(
        methods_params(
            {"experiment": required_param({"type": "string"}, "the cells' experiment")},
            "roc_auc",
        )
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiment = params["experiment"]
        runs, scope = scoped_runs(config, name, [experiment], params)
        metric = params["metric"]
        dataset = config.datasets[config.experiments[experiment]["dataset"]]
        tracked = dataset["training"]["round_metrics"]
        require(
            metric in tracked,
            f"reports.{name}: experiment {experiment} records no per-round {metric}; add it to "
            f"datasets.{config.experiments[experiment]['dataset']}.training.round_metrics",
        )
        display = MetricDisplay.resolve(metric)
        return methods_spec(name, params, config, display, runs, scope=scope)

    def curves(self, spec: dict[str, Any], inputs: list[Path]) -> dict[str, list[list[float]]]:
        """method id -> per seed, the per-round scope means (unscaled)."""
        means = (
            (run["method"], round_means(metrics, spec["scope"], spec["metric"], where))
            for run, metrics, where in run_metrics(spec, inputs)
        )
        return by_method(spec, means, "figure")

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        import numpy as np
        from matplotlib.ticker import MaxNLocator

        plt = pyplot()
        display = MetricDisplay.from_spec(spec)
        curves = self.curves(spec, inputs)
        fig, ax = plt.subplots(figsize=(5.5, 3.6))
        for method_id, label in spec["methods"]:
            seeds = curves[method_id]
            require(
                len({len(s) for s in seeds}) == 1,
                f"figure {spec['name']}: the seeds of {method_id} ran different numbers of rounds",
            )
            data = display.scale(1.0) * np.asarray(seeds, dtype=float)
            mean, std = np.nanmean(data, axis=0), np.nanstd(data, axis=0)
            rounds = np.arange(1, data.shape[1] + 1)
            (line,) = ax.plot(rounds, mean, marker="o", ms=2.5, lw=1.2, label=label)
            if len(seeds) > 1:
                ax.fill_between(rounds, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        ax.set_xlabel("communication round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylabel(score_label(display, spec["scope"]))
        ax.legend(fontsize=8, frameon=False)
        ax.set_title(spec["title"], fontsize=10)
        fig.tight_layout()
        return fig
