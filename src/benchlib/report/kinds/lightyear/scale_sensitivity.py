"""ANA-scale sensitivity (LIGHTYEAR first version, Appendix B, Figures 8-9): the mean validation
accuracy over clients after every round, one line per ANA scale s, one panel per number of
malfunctioning clients, for one method (star FedAvg in the paper). The scales come from the
experiment's ``axes: {ana.scale: [...]}`` (one variant experiment per scale,
``<experiment>__ana.scale_<s>``). Config entry::

    reports:
      lightyear_v1_fig8: {kind: scale_sensitivity, experiment: femnist_scale, method: fedavg}

Reads the cells' metrics.json (their per-round history).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Params
from benchlib.primitives.errors import require
from benchlib.report.base import derived_param, register_kind, required_param, spec_value
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

AXIS = "ana.scale"


def scale_variants(config: ReportConfig, experiment: str) -> list[tuple[float, str]]:
    """(scale, variant experiment) of every ANA-scale variant of ``experiment``, by scale."""
    found = [
        (float(exp["axes_values"][AXIS]), name)
        for name, exp in config.experiments.items()
        if exp["base"] == experiment and AXIS in exp["axes_values"]
    ]
    require(
        bool(found),
        f"experiment {experiment!r} has no '{AXIS}' axis; give it axes: {{{AXIS}: [s, ...]}}",
    )
    return sorted(found)


def sensitivity_frame(spec: dict[str, Any], inputs: list[Path]) -> pd.DataFrame:
    """Mean and std over clients per (k, scale, round); values in percent."""
    return scaled_round_stats(spec_value(spec, "runs"), inputs, ["k", "scale"], 100)


@register_kind
class ScaleSensitivity(RunsFigure):
    name = "scale_sensitivity"
    params = Params(
        {
            "experiment": required_param(
                {"type": "string"}, "the base experiment with the ana.scale axis"
            ),
            "method": derived_param(
                {"type": "string"}, "the method drawn", "the experiment's first method"
            ),
            "k": derived_param(
                {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 1}},
                "panels",
                "the experiment's k > 0",
            ),
            "title": derived_param(
                {"type": "string"},
                "figure title",
                "'<method label> under ANA: validation per round'",
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        variants = scale_variants(config, params["experiment"])
        first = config.experiments[variants[0][1]]
        method = params["method"] if params["method"] is not None else first["methods"][0]
        require("ana" in first["malfunctions"], f"experiment {params['experiment']} has no ana")
        ks = params["k"] if params["k"] is not None else [k for k in first["k"] if k > 0]
        runs = []
        for scale, experiment in variants:
            check_methods(config, experiment, [method])
            check_ks(config, experiment, ks)
            for k in ks:
                for seed in config.experiments[experiment]["seeds"]:
                    path = run_file(experiment, "ana", method, k, seed)
                    runs.append({"k": k, "scale": scale, "path": path})
        title = params["title"]
        if title is None:
            title = f"{config.method_label(method)} under ANA: validation per round"
        return {
            "name": name,
            "method": config.method_label(method),
            "runs": runs,
            "title": title,
        }

    def draw(self, spec: dict[str, Any], inputs: list[Path]) -> Any:
        """The matplotlib figure (tests read its lines and images back)."""
        stats = sensitivity_frame(spec, inputs)
        plt = pyplot()
        ks = sorted(stats["k"].unique())
        figure, axes = plt.subplots(1, len(ks), figsize=(3.2 * len(ks), 2.8), squeeze=False)
        for ax, k in zip(axes[0], ks, strict=True):
            panel = stats[stats["k"] == k]
            for scale, line in panel.groupby("scale", sort=True):
                ax.plot(line["round"], line["mean"], marker="o", ms=3, label=f"s = {scale:g}")
            ax.set_xlabel("round")
            ax.set_ylabel(f"validation accuracy (%) ({k})")
            ax.set_title(f"{k} malfunctioning")
            ax.legend(fontsize="small")
        figure.suptitle(spec_value(spec, "title"))
        return figure
