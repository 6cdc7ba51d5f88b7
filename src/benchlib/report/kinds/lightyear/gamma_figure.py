"""Per-round validation curves (LIGHTYEAR appendix Figure 13, first version's Figure 6): the mean
and a +-1 std band over clients of each client's validation metric after every round, one line
per method of an experiment at one k (default 0, no malfunction). The gamma ablation is an
experiment whose methods are star FedAvg with gamma = 1 (plain) and gamma = 0.95 (the
gamma^t-regularised aggregation, ``fedavg`` parameter ``gamma``). Config entry::

    reports:
      lightyear_fig13: {kind: gamma_figure, experiments: [femnist_gamma]}

One panel per experiment. Reads the cells' metrics.json (their per-round history).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.report.base import (
    check_experiments,
    derived_param,
    experiment_title,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.figures import pyplot
from benchlib.report.kinds.common.history import (
    RunsFigure,
    check_ks,
    check_methods,
    run_file,
    scaled_round_stats,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

NAMES = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}}


def curve_frame(spec: dict[str, Any], inputs: list[Path]) -> pd.DataFrame:
    """Mean and std over clients per (panel, method label, round), values scaled for display."""
    scale = 100.0 if spec["percent"] else 1.0
    return scaled_round_stats(spec_value(spec, "runs"), inputs, ["panel", "label"], scale)


@register_kind
class GammaFigure(RunsFigure):
    name = "gamma_figure"
    params = Params(
        {
            "experiments": required_param(NAMES, "one panel each"),
            "methods": derived_param(NAMES, "lines", "each experiment's methods"),
            "k": Param({"type": "integer", "minimum": 0}, 0, "malfunctioning clients"),
            "malfunction": derived_param(
                {"type": "string"}, "used when k > 0", "each experiment's first malfunction"
            ),
            "title": derived_param(
                {"type": "string"}, "figure title", "'Validation per round, k = <k>'"
            ),
            "percent": Param({"type": "boolean"}, True, "show 100 x value"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiments = params["experiments"]
        check_experiments(config, experiments)
        k = int(params["k"])
        runs = []
        for experiment in experiments:
            exp = config.experiments[experiment]
            methods = params["methods"] if params["methods"] is not None else exp["methods"]
            check_methods(config, experiment, methods)
            check_ks(config, experiment, [k])
            malfunction = params["malfunction"]
            if malfunction is None:
                malfunction = exp["malfunctions"][0]
            require(
                malfunction in exp["malfunctions"],
                f"experiment {experiment} has no malfunction {malfunction!r}",
            )
            for method in methods:
                for seed in exp["seeds"]:
                    runs.append(
                        {
                            "panel": experiment_title(config, experiment),
                            "label": config.method_label(method),
                            "path": run_file(experiment, malfunction, method, k, seed),
                        }
                    )
        title = params["title"] if params["title"] is not None else f"Validation per round, k = {k}"
        return {
            "name": name,
            "k": k,
            "runs": runs,
            "title": title,
            "percent": params["percent"],
        }

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        """The matplotlib figure (tests read its lines and images back)."""
        stats = curve_frame(spec, inputs)
        plt = pyplot()
        panels = list(dict.fromkeys(run["panel"] for run in spec["runs"]))
        labels = list(dict.fromkeys(run["label"] for run in spec["runs"]))
        figure, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 2.8), squeeze=False)
        for ax, panel in zip(axes[0], panels, strict=True):
            for label in labels:
                line = stats[(stats["panel"] == panel) & (stats["label"] == label)]
                if line.empty:
                    continue
                ax.plot(line["round"], line["mean"], marker="o", ms=3, label=label)
                ax.fill_between(
                    line["round"], line["mean"] - line["std"], line["mean"] + line["std"], alpha=0.2
                )
            ax.set_title(panel)
            ax.set_xlabel("round")
            ax.set_ylabel("validation " + ("(%)" if spec["percent"] else "metric"))
            ax.legend(fontsize="small")
        figure.suptitle(spec_value(spec, "title"))
        return figure
