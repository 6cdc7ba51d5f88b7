"""Ranking of methods over the cells of one or more experiments: each (malfunction, k, seed) cell is
a block, the methods are the treatments, a block's value of a method is its mean client test metric
(:mod:`benchlib.report.statistics.ranking`). The figure draws the critical-difference diagram of the
mean ranks (Friedman test, Nemenyi or Conover post-hoc) and the interquartile mean per method with
its stratified-bootstrap CI; it states what the blocks are and what it cannot show. The numbers go
to ``figures/<name>.csv`` beside it. Config entry::

    reports:
      mnist5k_ranking: {kind: ranking, experiments: [mnist5k]}
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.declarations.params import Param, Params
from benchlib.grid.paper_configs import added_methods
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.primitives.limits import MAX_RESAMPLES
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_malfunctions,
    check_outputs,
    derived_param,
    experiment_title,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.statistics.inference import is_lower_better
from benchlib.report.statistics.table import METRIC_PARAMS, MetricDisplay, metric_display

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig
    from benchlib.report.statistics.ranking import Ranking

LOG = logging.getLogger("benchlib")
NAMES = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}}
SHOWN_LEFT_OUT = 4  # left-out blocks listed in the figure (all of them go to the log)


def ranking_rows(collected: pd.DataFrame, experiments: list[dict[str, Any]]) -> pd.DataFrame:
    """The collected rows the ranking uses: per experiment its malfunctions' cells and the shared
    k = 0 cells, each row once."""
    import pandas as pd

    from benchlib.report.statistics.table import table_rows

    parts = [
        table_rows(collected, exp["experiment"], malfunction)
        for exp in experiments
        for malfunction in exp["malfunctions"]
    ]
    return pd.concat(parts, ignore_index=True).drop_duplicates(ignore_index=True)


def compute(spec: dict[str, Any], collected: pd.DataFrame) -> Ranking:
    """The ranking of a spec's methods over the blocks of ``collected``."""
    from benchlib.report.statistics.ranking import make_blocks, rank_methods
    from benchlib.report.statistics.table import check_metric

    display = MetricDisplay.from_spec(spec)
    check_metric(collected, display.metric, f"figure {spec['name']}")
    rows = ranking_rows(collected, spec_value(spec, "experiments"))
    methods = [m for m, _ in spec_value(spec, "methods")]
    blocks = make_blocks(rows, methods, display.column)
    return rank_methods(
        blocks,
        is_lower_better(display.metric),
        spec["alpha"],
        spec["posthoc"],
        spec["confidence"],
        spec["resamples"],
        spec["seed"],
    )


# -------------------------------------------------------------------------------- the numbers
def numbers_frame(spec: dict[str, Any], ranking: Ranking) -> pd.DataFrame:
    """One row per method (ranked ones best first, then those left out): mean rank, IQM and its
    CI (in the metric's display scale), the tests' results and the post-hoc p-values against
    every ranked method (``p_<method_id>``)."""
    import pandas as pd

    display = MetricDisplay.from_spec(spec)
    labels = dict(tuple(m) for m in spec["methods"])
    blocks = ranking.blocks
    test = ranking.friedman
    rows = []
    for position, method in enumerate(ranking.order, start=1):
        aggregate = ranking.aggregate
        row = {
            "method_id": method,
            "method": labels[method],
            "position": position if len(blocks.scores) else None,
            "mean_rank": ranking.mean_ranks[method],
            "iqm": display.scale(aggregate.point[method]) if aggregate else None,
            "iqm_low": display.scale(aggregate.low[method]) if aggregate else None,
            "iqm_high": display.scale(aggregate.high[method]) if aggregate else None,
            "blocks": len(blocks.scores),
            "blocks_left_out": len(blocks.blocks_left_out),
            "diverged_blocks": len(blocks.diverged.get(method, [])),
            "friedman_statistic": test.statistic,
            "friedman_p": test.p_value,
            "posthoc": ranking.posthoc_test if ranking.p_values is not None else None,
            "alpha": ranking.alpha,
            "cd": ranking.cd,
            "note": "",
        }
        for other in ranking.order:
            p = ranking.p_values.at[method, other] if ranking.p_values is not None else None
            row[f"p_{other}"] = p
        rows.append(row)
    for method in blocks.methods_left_out:
        note = "no value in any block; left out"
        rows.append({"method_id": method, "method": labels[method], "note": note})
    columns = [*rows[0]] if ranking.order else ["method_id", "method", "note"]
    frame = pd.DataFrame(rows, columns=columns)
    if "not_in_paper" in spec:  # methods added to paper experiments (add_methods)
        frame["in_paper"] = ~frame["method_id"].isin(spec["not_in_paper"])
    return frame


def caption_lines(spec: dict[str, Any], ranking: Ranking) -> list[str]:
    """What the figure states besides its panels: the blocks, the direction, the tests, the
    aggregate and everything left out or not shown."""
    display = MetricDisplay.from_spec(spec)
    blocks = ranking.blocks
    n_blocks, n_methods = blocks.scores.shape
    seeds = blocks.seeds
    several = len(spec["experiments"]) > 1
    what = "(experiment, malfunction, k, seed)" if several else "(malfunction, k, seed)"
    extra = [k.removeprefix("axis_") for k in blocks.keys if k.startswith("axis_")]
    if extra:
        what = what[:-1] + ", " + ", ".join(extra) + ")"
    lines = [
        f"Blocks: N = {n_blocks} cells {what}; k = 0 is one block shared by every malfunction; "
        f"methods: {n_methods}; block value: mean client {display.label}, "
        f"{'lower' if ranking.lower_is_better else 'higher'} is better (rank 1 = best)."
    ]
    if len(seeds) == 1:
        lines.append(
            f"One seed ({seeds[0]}): the blocks are malfunction x k only; the ranking cannot "
            "show seed-to-seed variation."
        )
    test = ranking.friedman
    if test.statistic is None:
        lines.append(f"{test.note}; no post-hoc test and no critical difference.")
    else:
        verdict = "the methods differ" if test.p_value < ranking.alpha else "no difference shown"
        lines.append(
            f"Friedman chi2({n_methods - 1}) = {test.statistic:.2f}, p = {test.p_value:.2g} "
            f"({verdict} at alpha = {ranking.alpha}). Post-hoc: "
            f"{_posthoc_label(ranking.posthoc_test)}; a bar joins methods it does not separate"
            f" at alpha = {ranking.alpha}; Nemenyi CD = {ranking.cd:.2f}."
        )
        if test.p_value >= ranking.alpha:
            lines.append("The Friedman test finds no difference: read no pairwise order.")
    if ranking.aggregate is not None:
        lines.append(
            f"IQM: interquartile mean of the block values; {round(100 * ranking.confidence)} % "
            f"percentile CI of a bootstrap stratified by block ({spec['resamples']} resamples "
            f"of each block's clients, seed {spec['seed']})"
            + ("; with fewer than 4 blocks the IQM is the plain mean." if n_blocks < 4 else ".")
        )
    for method, labels in blocks.diverged.items():
        lines.append(
            f"\u2020 {method} diverged (non-finite models) in {len(labels)} ranked "
            f"block{'s' if len(labels) != 1 else ''} ({', '.join(labels[:3])}"
            f"{', ...' if len(labels) > 3 else ''}): ranked by its measured values."
        )
    if "not_in_paper" in spec:
        labels = dict(tuple(m) for m in spec["methods"])
        added = ", ".join(labels[m] for m in spec["not_in_paper"])
        lines.append(f"Not in the paper (added with add_methods): {added}.")
    left = blocks.left_out
    lines += left[:SHOWN_LEFT_OUT]
    if len(left) > SHOWN_LEFT_OUT:
        lines.append(f"... and {len(left) - SHOWN_LEFT_OUT} more left out (listed in the log).")
    return lines


def _posthoc_label(test: str) -> str:
    from benchlib.report.statistics.ranking import POSTHOC_TESTS

    return POSTHOC_TESTS[test]


# -------------------------------------------------------------------------------- the figure
def plot_ranking(spec: dict[str, Any], ranking: Ranking, pdf: Path, png: Path) -> None:
    """The CD diagram (top), the IQM per method with its CI (bottom) and the caption lines."""
    import textwrap

    import pandas as pd
    import scikit_posthocs as sp
    import seaborn as sns

    from benchlib.report.figures import pyplot, save_figure

    plt = pyplot()
    display = MetricDisplay.from_spec(spec)
    labels = dict(tuple(m) for m in spec["methods"])
    order = ranking.order
    lines = [
        wrapped for line in caption_lines(spec, ranking) for wrapped in textwrap.wrap(line, 110)
    ]
    ranked = len(order) >= 2 and len(ranking.blocks.scores) > 0
    text_height = 0.16 * len(lines) + 0.5  # + room for the IQM axis label
    heights = [1.2 + 0.32 * len(order), 0.3 * len(order) + 0.6, text_height] if ranked else [1.0]
    figure = plt.figure(figsize=(8.5, sum(heights) + (0 if ranked else text_height)))
    if ranked:
        palette = dict(zip(order, sns.color_palette(n_colors=len(order)), strict=True))
        grid = figure.add_gridspec(3, 1, height_ratios=heights, hspace=0.15)
        cd_ax, iqm_ax = figure.add_subplot(grid[0]), figure.add_subplot(grid[1])
        ranks = {labels[m]: float(ranking.mean_ranks[m]) for m in order}
        if ranking.p_values is not None:
            p_values = ranking.p_values.rename(index=labels, columns=labels)
            title = f"Mean rank (1 = best), {_posthoc_label(ranking.posthoc_test)} post-hoc"
        else:  # no test: no bars (none is drawn, none is claimed)
            p_values = pd.DataFrame(0.0, index=list(ranks), columns=list(ranks))
            title = "Mean rank (1 = best); too few blocks or methods for a test"
        sp.critical_difference_diagram(
            ranks,
            p_values,
            alpha=ranking.alpha,
            ax=cd_ax,
            color_palette={labels[m]: palette[m] for m in order},
            label_fmt_left="{label} ({rank:.2f})",
            label_fmt_right="({rank:.2f}) {label}",
        )
        if ranking.cd is not None:
            _plot_cd(cd_ax, min(ranks.values()), ranking.cd)
        cd_ax.set_title(title, fontsize=10, pad=30 if ranking.cd is not None else 18)
        _plot_iqm(iqm_ax, ranking, order, labels, palette, display)
    else:
        grid = figure.add_gridspec(2, 1, height_ratios=[1.0, text_height])
        empty = figure.add_subplot(grid[0])
        empty.axis("off")
        empty.text(0.5, 0.5, "Nothing to rank: fewer than 2 methods or no block", ha="center")
    text_ax = figure.add_subplot(grid[-1])
    text_ax.axis("off")
    text_ax.text(0, 0, "\n".join(lines), va="bottom", ha="left", fontsize=7, family="monospace")
    figure.suptitle(spec_value(spec, "title"), fontsize=11, y=1.02)
    save_figure(figure, pdf, png)


def _plot_cd(ax: Any, start: float, cd: float) -> None:
    """The critical difference as a bar above the rank axis and its tick labels."""
    low, high = ax.get_ylim()
    y = high + 1.0
    ax.plot([start, start + cd], [y, y], color="k", lw=1.5, clip_on=False)
    for x in (start, start + cd):
        ax.plot([x, x], [y - 0.15, y + 0.15], color="k", lw=1.5, clip_on=False)
    ax.text(start + cd / 2, y + 0.2, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(low, y + 0.6)


def _plot_iqm(
    ax: Any,
    ranking: Ranking,
    order: list[str],
    labels: dict[str, str],
    palette: dict[str, Any],
    display: MetricDisplay,
) -> None:
    aggregate = ranking.aggregate
    for y, method in enumerate(order):
        point = display.scale(aggregate.point[method])
        low, high = display.scale(aggregate.low[method]), display.scale(aggregate.high[method])
        ax.errorbar(
            point,
            y,
            xerr=[[point - low], [high - point]],
            fmt="o",
            color=palette[method],
            capsize=3,
        )
        ax.annotate(
            f"{point:.{display.decimals}f} [{low:.{display.decimals}f}, "
            f"{high:.{display.decimals}f}]",
            (high, y),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    ax.set_yticks(range(len(order)), [labels[m] for m in order])
    ax.invert_yaxis()
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.margins(x=0.25)
    ax.grid(axis="x", alpha=0.3)
    unit = " (%)" if display.percent else ""
    ax.set_xlabel(f"IQM of the block values: mean client {display.label}{unit}", fontsize=9)


@register_kind
class RankingFigure(ReportKind):
    name = "ranking"
    output = "figure_numbers"
    params = Params(
        {
            "experiments": required_param(NAMES, "experiments whose cells are the blocks"),
            "malfunctions": derived_param(NAMES, "malfunctions", "each experiment's own"),
            "methods": derived_param(
                NAMES, "the methods ranked", "every method of the experiments, in their order"
            ),
            "posthoc": Param(
                {"enum": ["nemenyi", "conover"]},
                "nemenyi",
                "pairwise post-hoc test after the Friedman test (conover: Holm-adjusted)",
            ),
            "alpha": Param(
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                0.05,
                "significance level of the tests and the critical difference",
            ),
            "confidence": Param(
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                0.95,
                "confidence level of the IQM intervals",
            ),
            "resamples": Param(
                {"type": "integer", "minimum": 100, "maximum": MAX_RESAMPLES},
                2000,
                "bootstrap resamples of the IQM intervals",
            ),
            "seed": Param({"type": "integer", "minimum": 0}, 0, "seed of the bootstrap"),
            "title": derived_param({"type": "string"}, "figure title", "the experiments' titles"),
            **METRIC_PARAMS,
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiments = params["experiments"]
        check_experiments(config, experiments)
        entries = []
        for experiment in experiments:
            exp = config.experiments[experiment]
            malfunctions = params["malfunctions"]
            malfunctions = exp["malfunctions"] if malfunctions is None else malfunctions
            check_malfunctions(config, experiment, malfunctions)
            entries.append(
                {
                    "experiment": experiment,
                    "title": experiment_title(config, experiment),
                    "malfunctions": list(malfunctions),
                }
            )
        known = list(
            dict.fromkeys(m for e in experiments for m in config.experiments[e]["methods"])
        )
        methods = known if params["methods"] is None else params["methods"]
        for method in methods:
            require(
                method in known,
                f"method {method!r} is in none of the experiments {', '.join(experiments)}; "
                f"choose from: {', '.join(known)}",
            )
        title = params["title"]
        if title is None:
            title = "Ranking: " + ", ".join(e["title"] for e in entries)
        added = {
            m for e in experiments for m in added_methods(config.raw, config.experiments[e]["base"])
        }
        not_in_paper = [m for m in methods if m in added]  # add_methods: not the paper's
        return {
            "name": name,
            "experiments": entries,
            "methods": [[m, config.method_label(m)] for m in methods],
            **({"not_in_paper": not_in_paper} if not_in_paper else {}),
            "title": title,
            **{k: params[k] for k in ("posthoc", "alpha", "confidence", "resamples", "seed")},
            **metric_display(params).as_spec(),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [
            layout.collected_csv(exp["experiment"], malfunction)
            for exp in spec["experiments"]
            for malfunction in exp["malfunctions"]
        ]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        from benchlib.primitives.io import write_with_atomic

        check_outputs(self, outputs)
        require(bool(inputs), "ranking reads collected CSVs; pass --collected CSV...")
        collected = pd.concat([pd.read_csv(p) for p in inputs], ignore_index=True)
        ranking = compute(spec, collected)
        for line in ranking.blocks.left_out:
            LOG.warning("ranking %s: %s", spec["name"], line)
        numbers = numbers_frame(spec, ranking)
        plot_ranking(spec, ranking, outputs[0], outputs[1])
        write_with_atomic(
            outputs[2], lambda tmp: numbers.to_csv(tmp, index=False, float_format="%.10g")
        )
