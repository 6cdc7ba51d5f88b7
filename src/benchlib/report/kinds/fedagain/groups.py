"""The shared part of FedAgain Figures 8, 9 and 10 (``fedagain_bars``) and 11 (``fedagain_box``):
methods x groups x metrics. No kind is registered here.

One panel per metric (accuracy, recall, precision, F1 by default); along x the groups (Figure 8:
one kidney-stone sub-dataset per group; Figures 9-10: one corruption scenario per group, each
pooling the seven sub-datasets' experiments; Figure 11: one partitioner per group); one bar (or
box) per method.

Statistic: per cell, the global model's metric on the clients' pooled clean test sets (accuracy:
the clients' accuracies weighted by their test-set sizes, exactly the pooled accuracy; macro
recall, precision and F1 from the per-class counts of the pooled predictions, as the paper
reports the global model's scores; cells without recorded counts fall back to the size-weighted
mean of the clients' macro values and the caption says how many: ``pooled_metric``); then, per
group and method, ``fedagain_bars`` shows the mean +- std (ddof 0) over the group's experiments
and seeds, ``fedagain_box`` their distribution (median, quartiles, whiskers at 1.5 IQR, mean as
a dot).

Config entry::

    reports:
      fedagain_fig9:
        kind: fedagain_bars
        groups:
          - {label: Light, experiments: [kidney_a_sur_scen__corruption_light, ...]}
        methods: [fedavg, fedprox, fedmedian, bulyan, fedagain]
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
    check_outputs,
    derived_param,
    required_param,
)
from benchlib.report.figures import pyplot, save_figure
from benchlib.report.kinds.fedagain.fedagain_fig13 import (
    LABEL_OF,
    add_caption,
    pooled_metric,
    with_diverged_note,
    with_weighted_note,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

METRICS = ["accuracy", "recall_macro", "precision_macro", "f1_macro"]
LABELS = {"accuracy": "Accuracy", **LABEL_OF}
STATISTIC = {
    "bars": "per cell the global model's metric on the pooled clean test sets of all clients "
    "(macro scores from the pooled predictions); bars: mean +- std over the group's experiments "
    "and seeds",
    "box": "per cell the global model's metric on the pooled clean test sets of all clients "
    "(macro scores from the pooled predictions); boxes: distribution over the group's "
    "experiments and seeds",
}


def group_values(spec: dict[str, Any], collected: pd.DataFrame) -> pd.DataFrame:
    """Long frame: group, method, metric, value (percent), one row per experiment x seed."""
    import pandas as pd

    parts = []
    labels = dict(tuple(m) for m in spec["methods"])
    for metric in spec["metrics"]:
        per_cell = pooled_metric(collected, metric)
        for group in spec["groups"]:
            rows = per_cell[
                per_cell["experiment"].isin(group["experiments"])
                & per_cell["method_id"].isin(labels)
            ]
            parts.append(
                rows.assign(
                    group=group["label"],
                    method=rows["method_id"].map(labels),
                    metric=LABELS.get(metric, metric),
                    value=100 * rows["value"],
                )
            )
    frame = pd.concat(parts, ignore_index=True)
    require(not frame.empty, "no collected results for the figure's experiments")
    return frame


class FedAgainGroups(ReportKind):
    """The shared kind of ``fedagain_bars`` and ``fedagain_box``: they differ only in ``style``."""

    output = "figure"
    style = "bars"
    params = Params(
        {
            "groups": required_param(
                {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["label", "experiments"],
                        "properties": {
                            "label": {"type": "string"},
                            "experiments": {
                                "type": "array",
                                "minItems": 1,
                                "items": {"type": "string"},
                            },
                        },
                    },
                },
                "along x: {label, experiments} each, the experiments' k = 0 cells pooled",
            ),
            "methods": derived_param(
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "one bar (box) each",
                "the first experiment's methods",
            ),
            "metrics": Param(
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                METRICS,
                "one panel each (pooled global-model scores)",
            ),
            "title": derived_param({"type": "string"}, "figure title", "the report's name"),
            "note": Param({"type": "string"}, "", "a line before the caption's statistic"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiments = [e for g in params["groups"] for e in g["experiments"]]
        check_experiments(config, experiments)
        methods = params["methods"] or list(config.experiments[experiments[0]]["methods"])
        for experiment in experiments:
            missing = [m for m in methods if m not in config.experiments[experiment]["methods"]]
            require(not missing, f"experiment {experiment} does not run methods {missing}")
            require(
                config.experiments[experiment]["k"] == [0],
                f"experiment {experiment}: FedAgain figures read k = 0 cells; set k: [0]",
            )
        return {
            "name": name,
            "groups": [dict(g) for g in params["groups"]],
            "methods": [[m, config.method_label(m)] for m in methods],
            "metrics": list(params["metrics"]),
            "title": params["title"] if params["title"] is not None else name,
            "note": params["note"],
            "statistic": STATISTIC[self.style],
            "inputs": [layout.collected_csv(e, "none") for e in dict.fromkeys(experiments)],
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return list(spec["inputs"])

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        check_outputs(self, outputs)
        collected = pd.concat([pd.read_csv(p) for p in inputs], ignore_index=True)
        frame = group_values(spec, collected)
        spec = with_diverged_note(with_weighted_note(spec, frame), collected)
        plot_groups(spec, frame, outputs[0], outputs[1], self.style)


def plot_groups(spec: dict[str, Any], frame: pd.DataFrame, pdf: Path, png: Path, style: str):
    plt = pyplot()
    import seaborn as sns

    sns.set_theme(style="whitegrid", context="paper")
    metrics = list(dict.fromkeys(frame["metric"]))
    order = [g["label"] for g in spec["groups"]]
    methods = [label for _, label in spec["methods"]]
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.4), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        part = frame[frame["metric"] == metric]
        common = {"data": part, "x": "group", "y": "value", "hue": "method", "order": order,
                  "hue_order": methods, "ax": ax}  # fmt: skip
        if style == "box":
            sns.boxplot(showmeans=True, **common)
        else:
            sns.barplot(errorbar=("sd", 1), capsize=0.1, estimator="mean", **common)
        ax.set_title(metric)
        ax.set_xlabel("")
        ax.set_ylabel("%")
        ax.tick_params(axis="x", labelsize=8)
        if ax is not axes[0][0] and ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.suptitle(spec["title"])
    add_caption(fig, spec, -0.02)
    fig.tight_layout()
    save_figure(fig, pdf, png)
