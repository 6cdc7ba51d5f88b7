"""Robustness figure (LIGHTYEAR Figures 3, 4 and 7): the mean client test metric vs. the number of
malfunctioning clients k, one line per method, one panel per malfunction and one row of panels per
experiment; optionally a +-1 std band across clients.

Every experiment yields one, named ``<experiment>_robustness``. Config entry::

    reports:
      lightyear_fig7: {kind: robustness_figure, experiments: [femnist, camelyon17],
                       malfunctions: [dynamic], std: true}
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
    derived_param,
    experiment_title,
    method_rows,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.figures import pyplot, save_figure
from benchlib.report.statistics.table import METRIC_PARAMS, MetricDisplay, metric_display

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

NAMES = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}}


def robustness_frame(
    collected: pd.DataFrame, panels: list[dict[str, Any]], display: MetricDisplay
) -> pd.DataFrame:
    """Long frame (experiment title, malfunction, method label, k, value, std) for plotting.

    ``panels``: [{experiment, title, malfunctions, methods: [[id, label]]}], in row order.
    """
    import pandas as pd

    from benchlib.report.statistics.table import check_metric, summarise, table_rows

    check_metric(collected, display.metric, "figure")
    parts = []
    for panel in panels:
        labels = dict(tuple(m) for m in panel["methods"])
        for malfunction in panel["malfunctions"]:
            stats = summarise(
                table_rows(collected, panel["experiment"], malfunction), metric=display.metric
            )
            stats = stats[stats["method_id"].isin(labels)]
            parts.append(
                stats.assign(
                    experiment=panel["title"],
                    malfunction=malfunction.upper(),
                    method=stats["method_id"].map(labels),
                    value=display.scale(stats["mean"]),
                    spread=display.scale(stats["std"]),
                )
            )
    frame = pd.concat(parts, ignore_index=True)
    experiments = ", ".join(p["experiment"] for p in panels)
    require(not frame.empty, f"no collected results for experiment {experiments}")
    return frame


def plot_robustness(
    frame: pd.DataFrame,
    title: str,
    pdf: Path,
    png: Path,
    display: MetricDisplay | None = None,
    std: bool = False,
    order: list[str] | None = None,
) -> None:
    """Draw the figure and write PDF and PNG atomically; ``order``: method labels, legend order."""
    pyplot()  # the Agg backend, before seaborn draws
    import seaborn as sns
    from matplotlib.ticker import MaxNLocator

    display = display or MetricDisplay.resolve()
    sns.set_theme(style="whitegrid", context="paper")
    present = set(frame["method"])
    order = [m for m in dict.fromkeys([*(order or []), *frame["method"]]) if m in present]
    palette = dict(zip(order, sns.color_palette(n_colors=len(order)), strict=True))
    rows = frame["experiment"].nunique() > 1
    facets = {"row": "experiment", "col": "malfunction"} if rows else {"col": "malfunction"}
    if not rows:
        facets["col_wrap"] = min(4, frame["malfunction"].nunique())
    grid = sns.relplot(
        data=frame,
        x="k",
        y="value",
        hue="method",
        hue_order=order,
        palette=palette,
        style="method",
        style_order=order,
        kind="line",
        markers=True,
        dashes=False,
        height=2.6,
        aspect=1.1,
        **facets,
    )
    if std:
        for key, ax in grid.axes_dict.items():
            experiment, malfunction = key if rows else (None, key)
            panel = frame[frame["malfunction"] == malfunction]
            if rows:
                panel = panel[panel["experiment"] == experiment]
            for method, line in panel.sort_values("k").groupby("method", sort=False):
                low, high = line["value"] - line["spread"], line["value"] + line["spread"]
                ax.fill_between(line["k"], low, high, color=palette[method], alpha=0.15, lw=0)
    if "diverged" not in frame:
        frame = frame.assign(diverged=0)
    for key, ax in grid.axes_dict.items():  # a diverged cell's point: a dagger beside it
        experiment, malfunction = key if rows else (None, key)
        panel = frame[(frame["malfunction"] == malfunction) & (frame["diverged"] > 0)]
        if rows:
            panel = panel[panel["experiment"] == experiment]
        for point in panel.itertuples():
            ax.annotate("\u2020", (point.k, point.value), color=palette[point.method], fontsize=11)
    if (frame["diverged"] > 0).any():
        grid.figure.text(
            0.01, -0.04, f"\u2020 diverged (non-finite models) in {int(frame['diverged'].sum())} "
            "cell(s): not comparable", fontsize=8,
        )  # fmt: skip
    for ax in grid.axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    grid.set_axis_labels("malfunctioning clients", display.axis_label)
    grid.set_titles("{row_name} -- {col_name}" if rows else "{col_name}")
    if display.percent:
        grid.set(ylim=(0, 100))
    grid.figure.suptitle(title, y=1.03)
    save_figure(grid.figure, pdf, png)


@register_kind
class RobustnessFigure(ReportKind):
    name = "robustness_figure"
    output = "figure"
    params = Params(
        {
            "experiments": required_param(NAMES, "one row of panels each, in this order"),
            "malfunctions": derived_param(NAMES, "panels", "each experiment's own malfunctions"),
            "title": derived_param({"type": "string"}, "figure title", "the experiments' titles"),
            "std": Param({"type": "boolean"}, False, "draw a +-1 std band across clients"),
            **METRIC_PARAMS,
        }
    )

    def implicit(self, config: ReportConfig) -> dict[str, dict[str, Any]]:
        return {
            f"{e}_robustness": {"experiments": [e]}
            for e, exp in config.experiments.items()
            if exp["default_reports"]
        }

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiments = params["experiments"]
        check_experiments(config, experiments)
        panels = []
        for experiment in experiments:
            malfunctions = (
                params["malfunctions"]
                if params["malfunctions"] is not None
                else config.experiments[experiment]["malfunctions"]
            )
            check_malfunctions(config, experiment, malfunctions)
            panels.append(
                {
                    "experiment": experiment,
                    "title": experiment_title(config, experiment),
                    "malfunctions": list(malfunctions),
                    "methods": method_rows(config, experiment),
                }
            )
        title = params["title"]
        if title is None:
            title = ", ".join(p["title"] for p in panels)
        return {
            "name": name,
            "panels": panels,
            "title": title,
            "std": params["std"],
            **metric_display(params).as_spec(),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [
            layout.collected_csv(panel["experiment"], malfunction)
            for panel in spec["panels"]
            for malfunction in panel["malfunctions"]
        ]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        check_outputs(self, outputs)
        require(bool(inputs), "robustness_figure reads collected CSVs; pass --collected CSV...")
        # per-malfunction CSVs share the k = 0 rows: keep each row once
        collected = pd.concat([pd.read_csv(p) for p in inputs], ignore_index=True)
        collected = collected.drop_duplicates(ignore_index=True)
        display = MetricDisplay.from_spec(spec)
        panels = spec_value(spec, "panels")
        frame = robustness_frame(collected, panels, display)
        order = [label for panel in panels for _, label in panel["methods"]]
        plot_robustness(
            frame,
            spec_value(spec, "title"),
            outputs[0],
            outputs[1],
            display,
            spec["std"],
            order,
        )
