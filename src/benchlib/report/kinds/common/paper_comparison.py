"""Paper-vs-ours report (``reports/<name>.md`` and ``reports/<name>.pdf``): every cell we ran next
to the paper's value (config/paper_values/lightyear.csv, transcribed from the paper's Tables 2-21),
the difference, whether ours lies within 2 paper stds of the paper's mean, and per column (one k
of one malfunction) Kendall's tau between our and the paper's order of the methods. Each compared
experiment states its scale (``paper`` grid or a ``sample``), so nobody mistakes a CPU sample for a
reproduction. The figure plots ours against the paper's mean per cell (the diagonal = agreement).
Our value over a diverged cell (non-finite models) carries a dagger, in the table and the figure,
and a note under the scale counts and names those cells (both modes).
Config entry::

    reports:
      lightyear_vs_paper:
        kind: paper_comparison
        compare:
          femnist: {dataset: femnist, scale: paper}
          femnist_sample: {dataset: femnist, scale: sample}

Cells are matched by (paper dataset, malfunction, method, k); the method is the config method's
implementation name (``fedavg``, ``krum``, ...), so an authors'-variant entry compares with the
same paper row. The statistic is the tables' (per-client final test metric, mean and population
std over all clients), in percent.

Two readings: a ``reading`` names which definitions of the methods an experiment ran (the
default config compares ``femnist`` = the authors' code with ``femnist_faithful`` = the original
papers). The report opens with one summary row per compared experiment and, per paper dataset,
one row per method with each reading's mean difference from the paper and share of cells within
2 paper stds side by side, so a reader sees what the paper's code choices changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.data.paths import resolve_input_path
from benchlib.declarations.params import Param, Params
from benchlib.grid.paper_configs import added_methods
from benchlib.primitives import layout
from benchlib.primitives.errors import require
from benchlib.primitives.limits import MAX_RESAMPLES
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_outputs,
    derived_param,
    experiment_title,
    register_kind,
    spec_value,
)
from benchlib.report.figures import mark_diverged, pyplot, save_figure
from benchlib.report.kinds.common.paper_tables import (
    COLUMN_ENTRY,
    SCALES,
    column_specs,
    paper_by_config_method,
    read_table_values,
    score_columns,
    spec_inputs,
    uncompared_values,
)
from benchlib.report.statistics.inference import CONFIDENCE, PAIRED_TESTS, RESAMPLES
from benchlib.report.statistics.order import taus_by
from benchlib.report.statistics.paper import (
    LIGHTYEAR_KEYS,
    interval_text,
    lightyear_statistics,
    test_text,
)
from benchlib.report.statistics.table import DIVERGED_SIGN, diverged_cells_note

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

PAPER_VALUES = "config/paper_values/lightyear.csv"
NOT_IN_PAPER = "not in the paper"  # the paper column of a method added with add_methods
DEFAULT_METRIC = "accuracy"  # a compare entry's collected metric unless it names one
NO_READING = "-"  # a compare entry's reading unless it names one
COMPARE = {
    "type": "object",
    "minProperties": 1,
    "additionalProperties": {
        "type": "object",
        "additionalProperties": False,
        "required": ["dataset", "scale"],
        "properties": {
            "dataset": {"type": "string", "description": "the paper's dataset (paper values)"},
            "scale": {"enum": sorted(SCALES)},
            "metric": {
                "type": "string",
                "description": "collected metric",
                "default": DEFAULT_METRIC,
            },
            "reading": {
                "type": "string",
                "description": "which methods' definitions ran, e.g. authors' code / originals",
                "default": NO_READING,
            },
        },
    },
}


def read_paper_values(path: Path) -> pd.DataFrame:
    """The transcribed paper values, checked for the columns the report needs."""
    import pandas as pd

    require(Path(path).is_file(), f"paper values {path} not found; restore it from the repository")
    frame = pd.read_csv(path)
    needed = {"table", "dataset", "malfunction", "method", "k", "metric", "mean", "std"}
    missing = sorted(needed - set(frame.columns))
    require(not missing, f"{path} lacks the columns {', '.join(missing)}")
    return frame


def compare_frame(
    collected: pd.DataFrame, paper: pd.DataFrame, experiments: list[dict[str, Any]]
) -> pd.DataFrame:
    """One row per cell we ran: ours (mean, std in percent), the paper's, difference, within."""
    import pandas as pd

    from benchlib.report.statistics.table import summarise

    parts = []
    for exp in experiments:
        rows = collected[collected["experiment"] == exp["experiment"]]
        if rows.empty:
            continue
        column = f"test_{exp['metric']}"
        require(column in rows.columns, f"collected results lack {column}")
        for malfunction in exp["malfunctions"]:
            cells = rows[(rows["malfunction"] == malfunction) & (rows["k"] > 0)]
            if cells.empty:
                continue
            stats = summarise(cells, metric=exp["metric"])
            stats = stats.assign(
                experiment=exp["experiment"],
                scale=exp["scale"],
                reading=exp["reading"],
                dataset=exp["dataset"],
                malfunction=malfunction,
                paper_method=stats["method_id"].map(dict(exp["methods"])),
                ours=100 * stats["mean"],
                ours_std=100 * stats["std"],
            )
            parts.append(stats.drop(columns=["mean", "std"]))
    require(bool(parts), "no collected results of the compared experiments")
    ours = pd.concat(parts, ignore_index=True)
    values = paper.rename(columns={"method": "paper_method", "mean": "paper", "std": "paper_std"})
    merged = ours.merge(
        values[["dataset", "malfunction", "paper_method", "k", "table", "paper", "paper_std"]],
        on=["dataset", "malfunction", "paper_method", "k"],
        how="left",
    )
    merged["difference"] = merged["ours"] - merged["paper"]
    merged["within_2std"] = (merged["difference"].abs() <= 2 * merged["paper_std"]).where(
        merged["paper"].notna()
    )
    return merged.sort_values(["experiment", "malfunction", "k", "method_id"], ignore_index=True)


def diverged_labels(collected: pd.DataFrame, experiments: list[dict[str, Any]]) -> list[str]:
    """The id (``experiment/malfunction/method/kK/seedS``) of every compared cell whose models
    went non-finite (collected ``nonfinite``), in the report's order."""
    if "nonfinite" not in collected:
        return []
    labels = []
    for exp in experiments:
        rows = collected[
            (collected["experiment"] == exp["experiment"])
            & (collected["k"] > 0)
            & collected["malfunction"].isin(exp["malfunctions"])
            & (collected["nonfinite"].fillna(0).astype(int) > 0)
        ]
        keys = ["malfunction", "k", "method_id", "seed"]
        for cell in rows.drop_duplicates(keys).sort_values(keys).itertuples():
            labels.append(
                layout.CELL.format(
                    experiment=exp["experiment"],
                    malfunction=cell.malfunction,
                    method=cell.method_id,
                    k=cell.k,
                    seed=cell.seed,
                )
            )
    return labels


def kendall_by_column(frame: pd.DataFrame) -> pd.DataFrame:
    """Kendall's tau (tau-b) of ours vs. the paper's method order per (experiment, malf., k)."""
    return taus_by(frame, ["experiment", "malfunction", "k"])


def reading_summary(frame: pd.DataFrame, taus: pd.DataFrame) -> pd.DataFrame:
    """Per compared experiment: cells run, cells with a paper value, how many lie within 2
    paper stds, the median |difference| and the mean Kendall tau over its columns."""
    import pandas as pd

    rows = []
    for experiment, part in frame.groupby("experiment", sort=False):
        compared = part.dropna(subset=["paper"])
        column_taus = taus[taus["experiment"] == experiment]["kendall_tau"].dropna()
        rows.append(
            {
                "experiment": experiment,
                "cells": len(part),
                "compared": len(compared),
                "within": int(compared["within_2std"].astype(bool).sum()),
                "median_abs_difference": (
                    float(compared["difference"].abs().median()) if len(compared) else None
                ),
                "mean_kendall_tau": float(column_taus.mean()) if len(column_taus) else None,
            }
        )
    return pd.DataFrame(rows)


def method_by_reading(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (paper dataset, paper method, experiment): the mean difference from the paper over
    the method's cells with a paper value, and how many of them lie within 2 paper stds."""
    compared = frame.dropna(subset=["paper"])
    grouped = compared.groupby(["dataset", "paper_method", "experiment"], sort=False)
    return grouped.agg(
        cells=("difference", "size"),
        mean_difference=("difference", "mean"),
        within=("within_2std", lambda w: int(w.astype(bool).sum())),
    ).reset_index()


def _num(value: Any, digits: int = 1) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def _summary_lines(
    experiments: dict[str, dict[str, Any]], frame: pd.DataFrame, taus: pd.DataFrame
) -> list[str]:
    """One row per compared experiment: its reading, scale and agreement with the paper."""
    lines = [
        "## Summary per compared run",
        "",
        "| experiment | reading | scale | cells | with a paper value | within 2 std | "
        "median abs. difference | mean Kendall tau |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in reading_summary(frame, taus).itertuples():
        exp = experiments[row.experiment]
        lines.append(
            f"| {exp['title']} | {exp['reading']} | {exp['scale']} | {row.cells} | "
            f"{row.compared} | {row.within} | {_num(row.median_abs_difference)} | "
            f"{_num(row.mean_kendall_tau, 2)} |"
        )
    return [*lines, ""]


def _readings_lines(experiments: dict[str, dict[str, Any]], frame: pd.DataFrame) -> list[str]:
    """Per paper dataset run in more than one reading: one row per method, the readings'
    mean differences from the paper side by side."""
    lines: list[str] = []
    for dataset, part in method_by_reading(frame).groupby("dataset", sort=False):
        runs = list(dict.fromkeys(part["experiment"]))
        if len(runs) < 2:
            continue
        names = [f"{experiments[r]['reading']} ({r})" for r in runs]
        lines += [
            f"## {dataset}: both readings per method",
            "",
            "Mean difference from the paper (ours - paper, percentage points) over the "
            "method's cells, and the cells within 2 paper stds.",
            "",
            "| method | " + " | ".join(names) + " |",
            "|---|" + "---|" * len(runs),
        ]
        order = [m for r in runs for _, m in experiments[r]["methods"]]
        for method in dict.fromkeys(m for m in order if m in set(part["paper_method"])):
            rows = part[part["paper_method"] == method]
            cells = []
            for run in runs:
                hit = rows[rows["experiment"] == run]
                cells.append(
                    "-"
                    if hit.empty
                    else f"{_num(hit['mean_difference'].iloc[0])} "
                    f"({int(hit['within'].iloc[0])} of {int(hit['cells'].iloc[0])})"
                )
            lines.append(f"| {method} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def markdown(
    spec: dict[str, Any],
    frame: pd.DataFrame,
    taus: pd.DataFrame,
    figure: str,
    intervals: pd.DataFrame | None = None,
    tests: pd.DataFrame | None = None,
    diverged: list[str] | None = None,
) -> str:
    """The report text (``intervals`` / ``tests``: :func:`lightyear_statistics`; ``diverged``:
    the labels of the diverged cells, :func:`diverged_labels`)."""
    import pandas as pd

    intervals = (
        pd.DataFrame(columns=[*LIGHTYEAR_KEYS, "method"]) if intervals is None else intervals
    )
    tests = pd.DataFrame(columns=LIGHTYEAR_KEYS) if tests is None else tests
    confidence = round(100 * spec["confidence"])
    experiments = {exp["experiment"]: exp for exp in spec_value(spec, "experiments")}
    not_in_paper = {name: exp.get("not_in_paper") or [] for name, exp in experiments.items()}
    lines = [f"# {spec_value(spec, 'title')}", ""]
    lines += [
        "Ours: per-client final test metric, mean and population std over all clients "
        "(malfunctioning ones included), in percent, as in the paper's tables. Paper: "
        f"`{PAPER_VALUES}` (transcribed from the final version's Tables 2-21; `table` names the "
        "source). `within 2 std`: |ours - paper| <= 2 x the paper's std. Kendall's tau: "
        "agreement of the methods' order per column (1 = same order, -1 = reversed). "
        f"{confidence} % CI: percentile bootstrap (seeded) of our mean over the cell's seeds x "
        "clients. Best vs. second: our best method of the column against our second, a "
        f"two-sided {PAIRED_TESTS[spec['test']].label} over the same seeds x "
        "clients (`n too small` where there are too few pairs); these statistics are ours, "
        "the paper gives none.",
        "",
        "## Scale of each compared run",
        "",
        "| experiment | paper dataset | scale | reading |",
        "|---|---|---|---|",
    ]
    for exp in spec_value(spec, "experiments"):
        reading = exp["reading"]
        lines.append(f"| {exp['title']} | {exp['dataset']} | {SCALES[exp['scale']]} | {reading} |")
    compared = frame.dropna(subset=["paper"])
    within = compared["within_2std"].astype(bool)
    lines += [
        "",
        f"Cells run: {len(frame)}; with a paper value: {len(compared)}; within 2 paper stds: "
        f"{int(within.sum())} ({_num(100 * within.mean() if len(compared) else None)} %).",
        "",
        *([diverged_cells_note(diverged), ""] if diverged else []),
        f"![ours vs. paper]({figure})",
        "",
        *_summary_lines(experiments, frame, taus),
        *_readings_lines(experiments, frame),
    ]
    for (experiment, malfunction), part in frame.groupby(["experiment", "malfunction"], sort=True):
        table = part["table"].dropna()
        source = f" (paper Table {int(table.iloc[0])})" if len(table) else ""
        lines += [f"## {experiment}: {malfunction.upper()}{source}", ""]
        lines += [
            f"| method | k | ours | paper | difference | within 2 std | {confidence} % CI |",
            "|---|---|---|---|---|---|---|",
        ]
        for row in part.itertuples():
            within_text = (
                "-" if row.within_2std != row.within_2std else ("yes" if row.within_2std else "no")
            )
            if row.method_id in not_in_paper.get(experiment, ()):
                paper_text = NOT_IN_PAPER
            elif row.paper != row.paper:
                paper_text = "-"
            else:
                paper_text = f"{_num(row.paper)} +- {_num(row.paper_std)}"
            mark = DIVERGED_SIGN if getattr(row, "diverged", 0) else ""
            lines.append(
                f"| {row.method_id} | {row.k} | {_num(row.ours)} +- {_num(row.ours_std)}{mark} | "
                f"{paper_text} | {_num(row.difference)} | {within_text} | "
                f"{interval_text(intervals, (experiment, malfunction, row.k), row.method_id)} |"
            )
        column = taus[(taus["experiment"] == experiment) & (taus["malfunction"] == malfunction)]
        if not column.empty:
            lines += ["", "| k | methods | Kendall tau | best vs. second |", "|---|---|---|---|"]
            for row in column.itertuples():
                verdict = test_text(tests, (experiment, malfunction, row.k))
                lines.append(
                    f"| {row.k} | {row.methods} | {_num(row.kendall_tau, 2)} | {verdict} |"
                )
        lines.append("")
    return "\n".join(lines)


def plot_comparison(frame: pd.DataFrame, title: str, pdf: Path) -> None:
    """Ours vs. the paper's mean per cell, one colour per (paper) method and one marker per
    reading, the diagonal drawn; a value over diverged cells gets a dagger and a note below."""
    plt = pyplot()
    compared = frame.dropna(subset=["paper"])
    figure, ax = plt.subplots(figsize=(4.2, 4.0))
    readings = list(dict.fromkeys(compared["reading"]))
    markers = dict(zip(readings, "o^sDvP*X", strict=False))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, (method, part) in enumerate(compared.groupby("paper_method", sort=True)):
        for reading, cells in part.groupby("reading", sort=False):
            label = method if len(readings) == 1 else f"{method} ({reading})"
            ax.scatter(
                cells["paper"],
                cells["ours"],
                s=14,
                color=colours[index % len(colours)],
                marker=markers.get(reading, "o"),
                label=label,
            )
    mark_diverged(ax, compared, "paper", "ours")
    ax.plot([0, 100], [0, 100], color="grey", lw=0.8, ls="--")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("paper (%)")
    ax.set_ylabel("ours (%)")
    ax.set_title(title, fontsize=9)
    if not compared.empty:
        ax.legend(fontsize="x-small", ncol=2)
    save_figure(figure, pdf)


@register_kind
class PaperComparison(ReportKind):
    name = "paper_comparison"
    output = "markdown"
    params = Params(
        {
            "compare": derived_param(
                COMPARE,
                "LIGHTYEAR mode: experiment -> {dataset, scale[, metric, reading]}; give this or "
                "columns",
                "table mode",
            ),
            "columns": derived_param(
                {"type": "array", "minItems": 1, "items": COLUMN_ENTRY},
                "table mode (FedAgain, TFL): one entry per paper column {source, column, "
                "experiments, scope[, pooling, metrics, methods]}; give this or compare",
                "LIGHTYEAR mode",
            ),
            "scale": derived_param(
                {"enum": sorted(SCALES)},
                "table mode: the scale of the compared run (compare mode: per entry)",
                "not given (compare mode gives it per entry)",
            ),
            "scale_note": Param(
                {"type": "string"},
                "",
                "table mode: one line on the run (data, clients, rounds, seeds)",
            ),
            "references": Param(
                {"type": "array", "items": {"type": "string"}},
                [],
                "table mode: methods shown but left out of Kendall's tau and the best-vs-second "
                "test (e.g. centralised ERM)",
            ),
            "title": Param(
                {"type": "string"}, "LIGHTYEAR: our runs vs. the paper", "the report's heading"
            ),
            "paper_values": Param(
                {"type": "string"},
                PAPER_VALUES,
                "CSV of the paper's numbers (config/paper_values/)",
            ),
            "test": Param(
                {"enum": sorted(PAIRED_TESTS)},
                "paired_t",
                "paired test of each column's best method against the second",
            ),
            "confidence": Param(
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                CONFIDENCE,
                "confidence level of the bootstrap interval per cell",
            ),
            "resamples": Param(
                {"type": "integer", "minimum": 100, "maximum": MAX_RESAMPLES},
                RESAMPLES,
                "bootstrap resamples (seeded, so the interval is reproducible)",
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        modes = [mode for mode in ("compare", "columns") if params[mode]]
        require(len(modes) == 1, "give exactly one of compare (LIGHTYEAR) and columns (tables)")
        # the checkout's file when the working directory has none (snakemake -d elsewhere)
        values = resolve_input_path(params["paper_values"], "paper values")
        options = {key: params[key] for key in ("test", "confidence", "resamples", "title")}
        if modes == ["columns"]:
            require(bool(params["scale"]), "columns mode needs the run's scale")
            return {
                "name": name,
                "mode": "columns",
                "paper_values": str(values),
                "paper_values_name": params["paper_values"],
                "columns": column_specs(config, params["columns"], values),
                "scale": params["scale"],
                "scale_note": params["scale_note"],
                "references": list(params["references"]),
                **options,
            }
        experiments = []
        for experiment, entry in params["compare"].items():
            check_experiments(config, [experiment])
            exp = config.experiments[experiment]
            methods = [[m, config.methods[m]["method"]] for m in exp["methods"]]
            added = added_methods(config.raw, exp["base"])  # add_methods: not the paper's rows
            experiments.append(
                {
                    "experiment": experiment,
                    "title": experiment_title(config, experiment),
                    "malfunctions": list(exp["malfunctions"]),
                    "methods": methods,
                    "metric": DEFAULT_METRIC,
                    "reading": NO_READING,
                    **entry,
                    **({"not_in_paper": added} if added else {}),
                }
            )
        return {
            "name": name,
            "mode": "compare",
            "paper_values": str(values),
            "experiments": experiments,
            **options,
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        if spec["mode"] == "columns":
            return [spec["paper_values"], *spec_inputs(spec["columns"])]
        return [spec["paper_values"]] + [
            layout.collected_csv(exp["experiment"], malfunction)
            for exp in spec["experiments"]
            for malfunction in exp["malfunctions"]
        ]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.primitives.io import write_text_atomic

        check_outputs(self, outputs)
        require(
            len(inputs) >= 2 and Path(inputs[0]).name.endswith(".csv"),
            "paper_comparison reads the paper values CSV, then the cells' files; pass --collected",
        )
        render = _render_columns if spec["mode"] == "columns" else _render_lightyear
        text = render(spec, [Path(p) for p in inputs], Path(outputs[1]))
        write_text_atomic(outputs[0], text + "\n")


def _render_lightyear(spec: dict[str, Any], inputs: list[Path], pdf: Path) -> str:
    import pandas as pd

    paper = read_paper_values(inputs[0])
    collected = pd.concat([pd.read_csv(p) for p in inputs[1:]], ignore_index=True)
    collected = collected.drop_duplicates(ignore_index=True)
    experiments = spec_value(spec, "experiments")
    frame = compare_frame(collected, paper, experiments)
    taus = kendall_by_column(frame)
    intervals, tests = lightyear_statistics(collected, experiments, spec)
    plot_comparison(frame, spec_value(spec, "title"), pdf)
    diverged = diverged_labels(collected, experiments)
    return markdown(spec, frame, taus, pdf.name, intervals, tests, diverged)


def _render_columns(spec: dict[str, Any], inputs: list[Path], pdf: Path) -> str:
    from benchlib.report.kinds.common import paper_columns_report as report

    columns = spec_value(spec, "columns")
    values = read_table_values(inputs[0])
    paper = paper_by_config_method(values, columns)
    cells, units = score_columns(columns, inputs[1:])
    frame = report.compare_columns(cells, paper)
    taus = report.column_taus(frame, spec["references"])
    intervals, tests = report.column_statistics(units, spec["references"], spec)
    report.plot_columns(frame, spec_value(spec, "title"), pdf)
    seeds = sorted({int(cell[1]) for cell in cells["cell"]})  # cell: (experiment, seed)
    uncompared = uncompared_values(values, columns)
    diverged = report.diverged_labels(cells)
    return report.markdown(
        {**spec, "seeds": seeds}, frame, taus, intervals, tests, pdf.name, uncompared, diverged
    )
