"""The text and figure of a ``paper_comparison`` in ``columns`` mode (FedAgain, TFL): per paper
column ours vs. the paper with the difference, a bootstrap 95 % CI of ours, Kendall's tau of the
method order and the paired test of our best method against our second (see
:mod:`benchlib.report.statistics.inference`). Lower is better for the metrics in
:data:`~benchlib.report.statistics.inference.LOWER_IS_BETTER` (MSE), higher for the others."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.report.statistics.inference import (
    interval_frame,
    is_lower_better,
    test_frame,
)
from benchlib.report.statistics.order import taus_by
from benchlib.report.statistics.table import DIVERGED_SIGN, diverged_cells_note

if TYPE_CHECKING:
    import pandas as pd

KEYS = ["source", "column", "metric"]
YES_NO = {True: "yes", False: "no"}


def ours_per_method(rows: pd.DataFrame, count: str) -> pd.DataFrame:
    """Per (source, column, metric, method): ``ours`` (the mean value), ``count`` (how many
    rows), ``diverged`` (how many of them come from diverged cells) and ``ours_std`` (ddof 0)."""
    flags = rows["diverged"].astype(bool) if "diverged" in rows else False
    grouped = rows.assign(diverged=flags).groupby([*KEYS, "method"], sort=False)
    ours = grouped.agg(
        ours=("value", "mean"), **{count: ("value", "size")}, diverged=("diverged", "sum")
    ).reset_index()
    ours["ours_std"] = grouped["value"].std(ddof=0).to_numpy()
    ours["diverged"] = ours["diverged"].astype(int)
    return ours


def compare_columns(cells: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """One row per (source, column, metric, method) we ran: ours (mean and std over the
    column's cells), cells, diverged (how many of them diverged), the paper's mean, std and
    approx flag, difference, within 2 std."""
    ours = ours_per_method(cells, "cells")
    values = paper.rename(columns={"mean": "paper", "std": "paper_std"})
    merged = ours.merge(
        values[[*KEYS, "method", "paper", "paper_std", "approx"]],
        on=[*KEYS, "method"],
        how="left",
    )
    merged["difference"] = merged["ours"] - merged["paper"]
    merged["within_2std"] = (merged["difference"].abs() <= 2 * merged["paper_std"]).where(
        merged["paper_std"].notna()
    )
    return merged


def diverged_labels(cells: pd.DataFrame) -> list[str]:
    """The id (``experiment/malfunction/method/kK/seedS``) of every scored cell whose models went
    non-finite, once however many columns (or readings) read it."""
    if "diverged" not in cells:
        return []
    return sorted(set(cells.loc[cells["diverged"].astype(bool), "run"]))


def column_taus(frame: pd.DataFrame, references: list[str]) -> pd.DataFrame:
    """Kendall's tau-b of ours vs. the paper's values per (source, column, metric), over the
    methods with both (``references``, e.g. centralised ERM, left out)."""
    return taus_by(frame[~frame["method"].isin(references)], KEYS, sort=False)


def column_statistics(
    units: pd.DataFrame, references: list[str], options: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per cell CI, per column best-vs-second test) from the units frame."""
    intervals = interval_frame(
        units,
        KEYS,
        options["confidence"],
        options["resamples"],
    )
    tests = test_frame(
        units,
        KEYS,
        lambda key: is_lower_better(key[2]),
        options["test"],
        references,
    )
    return intervals, tests


def _num(value: Any, digits: int) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def _digits(metric: str) -> int:
    return 4 if is_lower_better(metric) else 2


def markdown(
    spec: dict[str, Any],
    frame: pd.DataFrame,
    taus: pd.DataFrame,
    intervals: pd.DataFrame,
    tests: pd.DataFrame,
    figure: str,
    uncompared: pd.DataFrame,
    diverged: list[str] | None = None,
) -> str:
    """The report text: the scale first (and the diverged cells, ``diverged``: labels of
    :func:`diverged_labels`), then a summary line per column, then each column, then the paper
    values of the compared sources that no cell gives (``uncompared``)."""
    from benchlib.report.kinds.common.paper_tables import SCALES

    confidence = round(100 * spec["confidence"])
    cells_read = int(frame["cells"].sum())
    seeds = ", ".join(map(str, sorted({int(s) for s in spec["seeds"]}))) or "-"
    lines = [
        f"# {spec['title']}",
        "",
        f"**Scale of this run: {SCALES[spec['scale']]}.** {spec['scale_note']}".rstrip(),
        "",
        f"Cell scores: {cells_read} (a cell counts once per column it fills); seeds: {seeds}.",
        "",
        *([diverged_cells_note(diverged), ""] if diverged else []),
        f"Paper: `{spec['paper_values_name']}` (every number the paper prints for these columns; "
        "`~` = the text gives it only approximately; a paper method is compared with the config "
        "method of that id or, failing one, with the config method that runs it, e.g. the "
        "paper's fedsr with fedsr_r50; the values no cell gives are listed at the end). Ours: "
        "mean over the column's cells (experiments x seeds); each cell scored as its column "
        "says (IF / OOF: as the TFL tables score it, the in-federation / held-out clients' "
        "pooled predictions, or their clients' mean for segmentation; pooled: the global model "
        f"on the pooled test sets). {confidence} % CI: percentile bootstrap (seeded) of that "
        "mean over the units, the cells (experiments x seeds), not the clients of one run. "
        "Kendall's tau: our order of the methods vs. the paper's (1 = same, -1 = reversed). "
        "Best vs. second: our best method against our second, paired over the same cells, "
        "two-sided; `n too small` where there are too few pairs. MSE: lower is better; every "
        "other metric: higher is better.",
        "",
        f"![ours vs. paper]({figure})",
        "",
        "## Summary per column",
        "",
        "| source | column | metric | methods | Kendall tau | our best | paper's best | "
        "best vs. second |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, part in frame.groupby(KEYS, sort=False):
        tau = taus[(taus[KEYS] == list(key)).all(axis=1)]
        test = tests[(tests[KEYS] == list(key)).all(axis=1)]
        lower = is_lower_better(key[2])
        compared = part[~part["method"].isin(spec["references"])].dropna(subset=["paper"])
        paper_best = (
            compared.sort_values("paper", ascending=lower)["method"].iloc[0]
            if len(compared)
            else "-"
        )
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {len(part)} | "
            f"{_num(tau['kendall_tau'].iloc[0] if len(tau) else None, 2)} | "
            f"{test['best'].iloc[0] if len(test) else '-'} | {paper_best} | "
            f"{test['verdict'].iloc[0] if len(test) else '-'} |"
        )
    lines.append("")
    for key, part in frame.groupby(KEYS, sort=False):
        digits = _digits(key[2])
        direction = "lower is better" if is_lower_better(key[2]) else "higher is better"
        lines += [
            f"## {key[0]}, {key[1]}: {key[2]} ({direction})",
            "",
            f"| method | ours | {confidence} % CI | units | paper | difference | within 2 std |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in part.itertuples():
            interval = intervals[
                (intervals[KEYS] == list(key)).all(axis=1) & (intervals["method"] == row.method)
            ]
            ci = "-"
            if len(interval):
                first = interval.iloc[0]
                ci = (
                    first["ci_note"]
                    if first["ci_low"] is None or first["ci_low"] != first["ci_low"]
                    else f"[{first['ci_low']:.{digits}f}, {first['ci_high']:.{digits}f}]"
                )
            paper = "-" if row.paper != row.paper else _num(row.paper, digits)
            if row.paper == row.paper and row.paper_std == row.paper_std:
                paper += f" +- {_num(row.paper_std, digits)}"
            if row.approx is True:
                paper = f"~{paper}"
            within = "-" if row.within_2std != row.within_2std else YES_NO[bool(row.within_2std)]
            mark = DIVERGED_SIGN if getattr(row, "diverged", 0) else ""
            ours = f"{_num(row.ours, digits)} +- {_num(row.ours_std, digits)}{mark}"
            lines.append(
                f"| {row.method} | {ours} | "
                f"{ci} | {int(interval['n'].iloc[0]) if len(interval) else 0} | {paper} | "
                f"{_num(row.difference, digits)} | {within} |"
            )
        lines.append("")
    return "\n".join(lines + _uncompared_lines(uncompared))


def _uncompared_lines(uncompared: pd.DataFrame) -> list[str]:
    lines = ["## Paper values not compared", ""]
    if uncompared.empty:
        return [*lines, "None: a cell gives every value the paper prints in these sources."]
    lines += [
        f"{len(uncompared)} values the paper prints in the compared sources that no cell of "
        "this report gives (method: the paper's name):",
        "",
        "| source | column | metric | method | paper | reason |",
        "|---|---|---|---|---|---|",
    ]
    for row in uncompared.itertuples():
        lines.append(
            f"| {row.source} | {row.column} | {row.metric} | {row.method} | "
            f"{_num(row.mean, _digits(row.metric))} | {row.reason} |"
        )
    return lines


def plot_columns(frame: pd.DataFrame, title: str, pdf: Path) -> None:
    """Ours vs. the paper per cell, one panel per metric, the diagonal drawn; a value over
    diverged cells gets a dagger and a note below its panel."""
    from benchlib.report.figures import mark_diverged, pyplot, save_figure

    plt = pyplot()
    compared = frame.dropna(subset=["paper"])
    metrics = list(dict.fromkeys(compared["metric"])) or ["-"]
    figure, axes = plt.subplots(1, len(metrics), figsize=(3.6 * len(metrics), 3.6), squeeze=False)
    for ax, metric in zip(axes[0], metrics, strict=True):
        part = compared[compared["metric"] == metric]
        for method, cells in part.groupby("method", sort=True):
            ax.scatter(cells["paper"], cells["ours"], s=14, label=method)
        mark_diverged(ax, part, "paper", "ours")
        if len(part):
            low = float(min(part["paper"].min(), part["ours"].min()))
            high = float(max(part["paper"].max(), part["ours"].max()))
            ax.plot([low, high], [low, high], color="grey", lw=0.8, ls="--")
            ax.legend(fontsize="x-small")
        ax.set_xlabel(f"paper ({metric})")
        ax.set_ylabel(f"ours ({metric})")
    figure.suptitle(title, fontsize=9)
    save_figure(figure, pdf)
