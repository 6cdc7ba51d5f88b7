"""FedAgain Figures 12 and 13: accuracy vs. corruption scenario (row ``corruption``) and vs.
number of clients (row ``clients``), one column per dataset, one line per method, the gap
between the first two methods shaded. Figure 13 has both rows, Figure 12 (``rows: [clients]``)
only the second.

Statistic (differs from LIGHTYEAR's per-client one): per cell, the global model's metric on the
clients' pooled clean test sets (accuracy: per-client test accuracy weighted by the client's test
size, i.e. correct predictions / test samples; macro precision / recall / F1 from the pooled
predictions' per-class counts, :func:`pooled_metric`); then mean +- std (ddof 0) over seeds
(error bars when there is more than one seed).

Config entry (each panel names two experiments with grid axes: ``corruption`` and ``clients``)::

    reports:
      fedagain_fig13:
        kind: fedagain_fig13
        panels:
          - {title: CIFAR-10, corruption: cifar10_corruption, clients: cifar10_clients}
          - {title: MNIST, corruption: mnist_corruption, clients: mnist_clients}
        methods: [fedagain, fedavg]
        note: ResNet18, 10 rounds, label skew
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.report.base import (
    ReportKind,
    check_outputs,
    derived_param,
    register_kind,
    required_param,
)
from benchlib.report.figures import pyplot, save_figure

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

STATISTIC = (
    "global-model {metric} on the pooled clean test sets of all clients; mean +- std over seeds"
)
WEIGHTED_NOTE = (
    "; macro scores of {cells} cell(s) that recorded no class counts (older runs): the "
    "test-size-weighted mean of the clients' macro scores"
)
SCENARIO_LABELS = {
    "none": "Clean",
    "light": "Light",
    "moderate": "Moderate",
    "heavy": "Heavy",
    "image_fractions": "Per-client image fractions",
}


def scenario_label(value: Any) -> str:
    """``light`` -> ``Light (10%, s3)``; ``{ratio, severity}`` -> ``30%, s3`` (``30%, s3, train
    only`` for the reading that leaves validation data clean; ``, rho 50% of images`` or ``, rho
    0/10/30/50% of images`` for a per-client image fraction)."""
    from benchlib.data.corruptions import scenario_of

    scenario = scenario_of(value)
    share = f"{scenario.ratio * 100:g}%, s{scenario.severity}"
    if scenario.subsets == ("train",):
        share += ", train only"
    fraction = scenario.image_fraction
    if fraction != 1.0:
        values = fraction if isinstance(fraction, tuple) else (fraction,)
        share += ", rho " + "/".join(f"{v * 100:g}" for v in values) + "% of images"
    if isinstance(value, str) and value != "none":
        return f"{SCENARIO_LABELS[value]} ({share})"
    return SCENARIO_LABELS["none"] if value == "none" else share


def axis_variants(config: ReportConfig, base: str, axis: str) -> list[tuple[str, Any]]:
    """(variant experiment, axis value) of experiment ``base``'s ``axis``, in config order."""
    found = [
        (name, exp["axes_values"][axis])
        for name, exp in config.experiments.items()
        if exp["base"] == base and axis in exp["axes_values"]
    ]
    require(
        bool(found),
        f"experiment {base!r} has no grid axis {axis!r}; give it axes: {{{axis}: [...]}}",
    )
    return found


LABEL_OF = {"recall_macro": "Recall", "precision_macro": "Precision", "f1_macro": "F1 score",
            "balanced_accuracy": "Balanced accuracy"}  # fmt: skip
# macro scores computed from the per-class counts of the pooled test predictions
POOLED_MACRO = ("precision_macro", "recall_macro", "balanced_accuracy", "f1_macro")
COUNTS_COLUMN = "class_counts"  # report/collect.py: per client, JSON of true/predicted/correct


def macro_scores(counts: list[dict[str, list[int]]]) -> dict[str, float]:
    """Macro precision, recall (= balanced accuracy) and F1 of the test predictions of several
    clients pooled: their per-class ``true`` / ``predicted`` / ``correct`` counts summed, then
    per class P = correct / predicted, R = correct / true, F1 = 2 correct / (true + predicted)
    (0 where the denominator is 0), averaged over the classes that are true or predicted at
    least once (the task's torchmetrics convention, as scikit-learn's)."""
    import numpy as np

    true, predicted, correct = (
        np.sum([np.asarray(c[key], dtype=np.float64) for c in counts], axis=0)
        for key in ("true", "predicted", "correct")
    )
    active = (true + predicted) > 0
    if not active.any():
        return dict.fromkeys(POOLED_MACRO, float("nan"))

    def ratio(num: np.ndarray, den: np.ndarray) -> float:
        values = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
        return float(values[active].mean())

    recall = ratio(correct, true)
    return {
        "precision_macro": ratio(correct, predicted),
        "recall_macro": recall,
        "balanced_accuracy": recall,
        "f1_macro": ratio(2 * correct, true + predicted),
    }


def pooled_metric(frame: pd.DataFrame, metric: str = "accuracy") -> pd.DataFrame:
    """Per (experiment, method_id, seed) the global model's ``metric`` on the clients' pooled
    test sets, column ``statistic`` saying how it was obtained: accuracy is sum(accuracy x
    n_test) / sum(n_test), exactly the pooled ratio (``pooled``); the macro scores come from
    the summed per-class counts when every client of the cell recorded them (``pooled``,
    :func:`macro_scores`), else (results of older runs) and for any other metric they are the
    size-weighted mean of the clients' values (``weighted``)."""
    import json

    column = f"test_{metric}"
    require(column in frame, f"the collected results have no {column} column")
    keys = ["experiment", "method_id", "seed"]
    weighted = frame.assign(_w=frame[column] * frame["n_test"])
    grouped = weighted.groupby(keys, as_index=False)[["_w", "n_test"]].sum()
    grouped = grouped.assign(
        value=grouped["_w"] / grouped["n_test"],
        statistic="pooled" if metric == "accuracy" else "weighted",
    ).drop(columns=["_w"])
    if metric not in POOLED_MACRO or COUNTS_COLUMN not in frame:
        return grouped
    pooled = {}
    for key, part in frame.groupby(keys):
        if part[COUNTS_COLUMN].notna().all():
            counts = [json.loads(text) for text in part[COUNTS_COLUMN]]
            pooled[key] = macro_scores(counts)[metric]
    for index, key in zip(grouped.index, grouped[keys].itertuples(index=False), strict=True):
        if tuple(key) in pooled:
            grouped.loc[index, ["value", "statistic"]] = [pooled[tuple(key)], "pooled"]
    return grouped


def with_weighted_note(spec: dict[str, Any], per_cell: pd.DataFrame) -> dict[str, Any]:
    """``spec`` with its statistic naming the cells whose macro scores are client means."""
    cells = per_cell[per_cell["statistic"] == "weighted"]
    if "metric" in per_cell:
        cells = cells[cells["metric"].isin([LABEL_OF.get(m, m) for m in POOLED_MACRO])]
    elif spec.get("metric") not in POOLED_MACRO:
        return spec
    count = len(cells.drop_duplicates(["experiment", "method_id", "seed"]))
    if not count:
        return spec
    return {**spec, "statistic": spec["statistic"] + WEIGHTED_NOTE.format(cells=count)}


def with_diverged_note(spec: dict[str, Any], collected: pd.DataFrame) -> dict[str, Any]:
    """``spec`` with its statistic counting the figure's diverged cells (non-finite models,
    collected ``nonfinite``): their values are drawn as measured, never as ordinary ones."""
    if "nonfinite" not in collected:
        return spec
    methods = dict(tuple(m) for m in spec["methods"])
    flagged = collected[
        (collected["nonfinite"].fillna(0).astype(int) > 0) & collected["method_id"].isin(methods)
    ].drop_duplicates(["experiment", "method_id", "seed"])
    if flagged.empty:
        return spec
    which = ", ".join(sorted({methods[m] for m in flagged["method_id"]}))
    cells = "cell" if len(flagged) == 1 else "cells"
    note = f"; \u2020 includes {len(flagged)} diverged {cells} (non-finite models: {which})"
    return {**spec, "statistic": spec["statistic"] + note}


def add_caption(fig: Any, spec: dict[str, Any], y: float) -> None:
    """Write the spec's statistic (after its optional note) centred below the figure, at ``y``."""
    caption = f"Statistic: {spec['statistic']}."
    if spec.get("note"):
        caption = f"{spec['note']}. {caption}"
    fig.text(0.5, y, caption, ha="center", va="top", fontsize=8, wrap=True)


def summary_frame(spec: dict[str, Any], collected: pd.DataFrame) -> pd.DataFrame:
    """Long frame: panel, row (corruption/clients), x position, x label, method, mean, std."""
    import pandas as pd

    per_seed = pooled_metric(collected, spec["metric"])
    stats = per_seed.groupby(["experiment", "method_id"])["value"].agg(
        mean="mean", std=lambda v: float(v.std(ddof=0)), seeds="size"
    )
    rows = []
    for panel in spec["panels"]:
        for row in spec["rows"]:
            for position, (experiment, label) in enumerate(panel[row]):
                for method_id, method in spec["methods"]:
                    if (experiment, method_id) not in stats.index:
                        continue
                    entry = stats.loc[(experiment, method_id)]
                    rows.append(
                        {"panel": panel["title"], "row": row, "x": position, "label": label,
                         "method": method, "mean": 100 * entry["mean"], "std": 100 * entry["std"],
                         "seeds": int(entry["seeds"])}
                    )  # fmt: skip
    frame = pd.DataFrame(rows)
    require(not frame.empty, "no collected results for the figure's experiments")
    return frame


@register_kind
class FedAgainFig13(ReportKind):
    name = "fedagain_fig13"
    output = "figure"
    params = Params(
        {
            "panels": required_param(
                {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["title"],
                        "properties": {
                            "title": {"type": "string"},
                            "corruption": {"type": "string"},
                            "clients": {"type": "string"},
                        },
                    },
                },
                "one column each: title and the base experiment of each row's grid axis",
            ),
            "methods": derived_param(
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                "one line each",
                "the methods of the first panel's first experiment",
            ),
            "rows": Param(
                {
                    "type": "array",
                    "minItems": 1,
                    "uniqueItems": True,
                    "items": {"enum": ["corruption", "clients"]},
                },
                ["corruption", "clients"],
                "one row of panels per grid axis",
            ),
            "metric": Param({"type": "string"}, "accuracy", "pooled global-model metric"),
            "title": Param(
                {"type": "string"},
                "FedAgain vs. baselines: corruption and scale",
                "figure title",
            ),
            "note": Param({"type": "string"}, "", "a line before the caption's statistic"),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        panels, inputs = [], []
        methods: list[str] | None = params["methods"]
        rows = list(params["rows"])
        experiments = config.experiments.values()
        for panel in params["panels"]:
            entry: dict[str, Any] = {"title": panel["title"]}
            for row in rows:
                require(row in panel, f"panel {panel['title']} names no {row} experiment")
                base = panel[row]
                require(
                    any(e["base"] == base and e["axes_values"] for e in experiments),
                    f"experiment {base!r} (panel {panel['title']}, {row}) is not defined under "
                    "experiments with grid axes",
                )
                variants = axis_variants(config, base, row)
                labels = [scenario_label(v) if row == "corruption" else str(v) for _, v in variants]
                entry[row] = [[e, label] for (e, _), label in zip(variants, labels, strict=True)]
                inputs += [layout.collected_csv(e, "none") for e, _ in variants]
                own = config.experiments[variants[0][0]]["methods"]
                methods = methods or list(own)
                missing = [m for m in methods if m not in own]
                require(not missing, f"experiment {base!r} does not run methods {missing}")
            panels.append(entry)
        assert methods is not None
        return {
            "name": name,
            "panels": panels,
            "rows": rows,
            "methods": [[m, config.method_label(m)] for m in methods],
            "metric": params["metric"],
            "title": params["title"],
            "note": params["note"],
            "statistic": STATISTIC.format(metric=params["metric"]),
            "inputs": sorted(set(inputs)),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return list(spec["inputs"])

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        check_outputs(self, outputs)
        collected = pd.concat([pd.read_csv(p) for p in inputs], ignore_index=True)
        frame = summary_frame(spec, collected)
        spec = with_weighted_note(spec, pooled_metric(collected, spec["metric"]))
        spec = with_diverged_note(spec, collected)
        plot_fig13(spec, frame, outputs[0], outputs[1])


def plot_fig13(spec: dict[str, Any], frame: pd.DataFrame, pdf: Path, png: Path) -> None:
    plt = pyplot()

    panels = [p["title"] for p in spec["panels"]]
    methods = [label for _, label in spec["methods"]]
    colours = dict(zip(methods, ["tab:green", "tab:red", "tab:blue", "tab:orange"], strict=False))
    rows = spec["rows"]
    xlabels = {"corruption": "corruption scenario", "clients": "number of clients"}
    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(4.2 * len(panels), 3.1 * len(rows)), squeeze=False
    )
    for col, panel in enumerate(panels):
        for r, row in enumerate(rows):
            xlabel = xlabels[row]
            ax = axes[r][col]
            part = frame[(frame["panel"] == panel) & (frame["row"] == row)]
            lines = {}
            for method in methods:
                line = part[part["method"] == method].sort_values("x")
                if line.empty:
                    continue
                lines[method] = line
                ax.errorbar(line["x"], line["mean"], yerr=line["std"] if (line["seeds"] > 1).any()
                            else None, marker="o", color=colours.get(method), label=method,
                            capsize=3)  # fmt: skip
            if len(lines) >= 2:
                first, second = (lines[m] for m in list(lines)[:2])
                merged = first.merge(second, on="x")
                ax.fill_between(merged["x"], merged["mean_x"], merged["mean_y"], color="green",
                                alpha=0.12, lw=0)  # fmt: skip
            labels = part.drop_duplicates("x").sort_values("x")
            ax.set_xticks(labels["x"], labels["label"], fontsize=8)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("accuracy (%)")
            ax.set_title(f"{panel}: {'corruption' if row == 'corruption' else 'scale'}")
            ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(spec["title"])
    add_caption(fig, spec, -0.01)
    fig.tight_layout()
    save_figure(fig, pdf, png)
