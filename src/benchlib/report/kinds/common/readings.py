"""Readings report (``reports/<name>.md`` and ``.pdf``): one paper table under every combination of
the readings its experiments sweep (``axes: {reading.<name>: [...]}``, see
:mod:`benchlib.grid.readings`), side by side: per column and reading ours per method with a
bootstrap CI over the cells (experiment x seed), Kendall's tau of our method order against the
paper's, and paired tests along the paper's order (each method against the next one the paper ranks
below it). It says plainly which readings, if any, reproduce the paper's order. Config entry::

    reports:
      tfl_table4_readings:
        kind: readings
        paper_values: config/paper_values/tfl.csv
        references: [erm]
        columns:   # as paper_comparison's columns; experiments = the swept experiments
          - {source: Table 4, column: E(24) -> W(24), experiments: [tpt48_ew], scope: oof}

A column's experiment is one the config sweeps readings over; the report finds its variants
(one per combination) and scores each as ``paper_comparison`` scores a column (the same
helpers). ``seeds`` limits the cells read (default: every seed of the experiments).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.data.paths import resolve_input_path
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import require
from benchlib.primitives.limits import MAX_RESAMPLES
from benchlib.report.base import ReportKind, check_experiments, check_outputs, register_kind
from benchlib.report.kinds.common.paper_columns_report import diverged_labels, ours_per_method
from benchlib.report.kinds.common.paper_tables import (
    COLUMN_ENTRY,
    SCALES,
    column_specs,
    paper_by_config_method,
    read_table_values,
    score_columns,
    spec_inputs,
)
from benchlib.report.statistics.inference import (
    CONFIDENCE,
    PAIRED_TESTS,
    POWER,
    RESAMPLES,
    detectable_difference,
    is_lower_better,
    paired_test,
)
from benchlib.report.statistics.order import tau_b
from benchlib.report.statistics.table import DIVERGED_SIGN, diverged_cells_note

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

KEYS = ["source", "column", "metric"]
ALPHA = 0.05


def reading_label(readings: dict[str, str]) -> str:
    """``dual_step = gamma_0.1, prior = raw``."""
    return ", ".join(f"{name} = {value}" for name, value in readings.items())


def combinations(config: ReportConfig, base: str) -> list[tuple[str, dict[str, str]]]:
    """(variant experiment, {reading: alternative}) of every reading combination of ``base``."""
    found = [
        (name, dict(exp["readings"]))
        for name, exp in config.experiments.items()
        if exp["base"] == base and exp["readings"] and not exp.get("implied")
    ]
    require(
        bool(found),
        f"experiment {base!r} sweeps no reading; give it axes: {{reading.<name>: [...]}}",
    )
    return found


def _combination_specs(
    config: ReportConfig, params: dict[str, Any], values: Path
) -> list[dict[str, Any]]:
    """One entry per reading combination: its readings, label and column specs."""
    by_base = {}
    for entry in params["columns"]:
        check_experiments(config, entry["experiments"])
        for base in entry["experiments"]:
            by_base[base] = {reading_label(r): e for e, r in combinations(config, base)}
    labels = list(next(iter(by_base.values())))
    for base, found in by_base.items():
        require(
            sorted(found) == sorted(labels),
            f"experiment {base!r} sweeps other readings than the report's other experiments",
        )
    result = []
    for label in labels:
        entries = [
            {**entry, "experiments": [by_base[b][label] for b in entry["experiments"]]}
            for entry in params["columns"]
        ]
        columns = column_specs(config, entries, values)
        if params["seeds"] is not None:
            for column in columns:
                column["files"] = [
                    f for f in column["files"] if f.get("seed") in set(params["seeds"])
                ]
                require(bool(column["files"]), f"no cell of seeds {params['seeds']}")
        variant = by_base[next(iter(by_base))][label]
        result.append(
            {
                "label": label,
                "readings": dict(config.experiments[variant]["readings"]),
                "columns": columns,
            }
        )
    return result


def score(
    units: pd.DataFrame, paper: pd.DataFrame, references: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(means, taus) of one reading: per (column, method) ours = the mean over the column's
    units, how many of them diverged (non-finite models) and the paper's value; per column
    Kendall's tau over the methods with a paper value (``references`` left out)."""
    import pandas as pd

    means = ours_per_method(units, "units")
    values = paper.rename(columns={"mean": "paper"})[[*KEYS, "method", "paper"]]
    means = means.merge(values, on=[*KEYS, "method"], how="left")
    rows = []
    kept = means[~means["method"].isin(references)].dropna(subset=["paper"])
    for key, part in kept.groupby(KEYS, sort=False):
        tau = tau_b(list(part["ours"]), list(part["paper"]))
        rows.append(dict(zip(KEYS, key, strict=True)) | {"methods": len(part), "tau": tau})
    return means, pd.DataFrame(rows, columns=[*KEYS, "methods", "tau"])


def order_tests(
    units: pd.DataFrame, means: pd.DataFrame, references: list[str], test: str
) -> pd.DataFrame:
    """Per column, each pair of methods adjacent in the paper's order (better, worse): our mean
    difference worse - better in the paper's direction (positive = ours agrees), the paired
    test over the common units and whether ours agrees / is significantly reversed."""
    import pandas as pd

    rows = []
    kept = means[~means["method"].isin(references)].dropna(subset=["paper"])
    for key, part in kept.groupby(KEYS, sort=False):
        lower = is_lower_better(key[2])
        order = part.sort_values("paper", ascending=lower, kind="stable")["method"].tolist()
        column = units[(units[KEYS] == list(key)).all(axis=1)]
        per_method = {
            m: dict(zip(c["unit"], c["value"], strict=True))
            for m, c in column.groupby("method", sort=False)
        }
        for better, worse in itertools.pairwise(order):
            n, _, p_value, note = paired_test(per_method[better], per_method[worse], test)
            ours = dict(zip(part["method"], part["ours"], strict=True))
            gap = ours[worse] - ours[better] if lower else ours[better] - ours[worse]
            common = [u for u in per_method[better] if u in per_method[worse]]
            detectable = detectable_difference(
                [per_method[worse][u] - per_method[better][u] for u in common]
            )
            rows.append(
                dict(zip(KEYS, key, strict=True))
                | {"better": better, "worse": worse, "gap": gap, "pairs": n}
                | {"p_value": p_value, "note": note, "verdict": pair_verdict(gap, p_value)}
                | {"detectable": detectable}
            )
    columns = [*KEYS, "better", "worse", "gap", "pairs", "p_value", "note", "verdict"]
    columns.append("detectable")
    return pd.DataFrame(rows, columns=columns)


def pair_verdict(gap: float, p_value: float | None, alpha: float = ALPHA) -> str:
    """``agrees`` / ``reversed``, with ``(significant)`` where the paired test's p < alpha."""
    word = "agrees" if gap > 0 else ("tied" if gap == 0 else "reversed")
    if p_value is not None and p_value < alpha and gap != 0:
        word += " (significant)"
    return word


def reproduces(
    taus: pd.DataFrame,
    tests: pd.DataFrame | None = None,
    min_tau: float = 1.0,
    min_columns: int | None = None,
) -> bool:
    """Whether a reading reproduces the paper's order: Kendall's tau >= ``min_tau`` in at least
    ``min_columns`` columns (default every column; the default ``min_tau`` 1 is the paper's
    order exactly), and no pair adjacent in the paper's order significantly reversed by the
    paired test (``tests``, :func:`order_tests`)."""
    values = taus["tau"].tolist()
    if not values:
        return False
    needed = len(values) if min_columns is None else min_columns
    hits = sum(1 for t in values if t is not None and t == t and t >= min_tau - 1e-12)
    reversed_ = tests is not None and bool((tests["verdict"] == "reversed (significant)").any())
    return hits >= needed and not reversed_


def conclusion(summary: list[dict[str, Any]], criterion: str = "") -> str:
    """The plain answer: which readings reproduce the paper's order (``criterion`` in words),
    or none and the closest (highest mean tau)."""
    criterion = criterion or criterion_text(1.0, None, 0)
    hits = [row["label"] for row in summary if row["reproduces"]]
    if hits:
        return (
            f"{len(hits)} of {len(summary)} readings reproduce the paper's order of the methods "
            f"({criterion}): {'; '.join(hits)}."
        )
    scored = [row for row in summary if row["mean_tau"] is not None]
    if not scored:
        return f"None of the {len(summary)} readings has a Kendall tau (too few methods)."
    best = max(row["mean_tau"] for row in scored)
    closest = [row["label"] for row in scored if abs(row["mean_tau"] - best) < 1e-12]
    return (
        f"None of the {len(summary)} readings reproduces the paper's order of the methods "
        f"({criterion}). Closest (mean Kendall tau {best:.2f}): {'; '.join(closest)}."
    )


def criterion_text(min_tau: float, min_columns: int | None, columns: int) -> str:
    """The reproduction criterion in words."""
    if min_tau >= 1 and (min_columns is None or min_columns >= columns):
        where = "the paper's order in every column"
    else:
        count = columns if min_columns is None else min_columns
        where = f"Kendall tau >= {min_tau:g} in at least {count} of {columns} columns"
    return f"{where}, and no pair adjacent in the paper's order significantly reversed"


def _num(value: Any, digits: int) -> str:
    return "-" if value is None or value != value else f"{value:.{digits}f}"


def _digits(metric: str) -> int:
    return 4 if is_lower_better(metric) else 2


def markdown(spec: dict[str, Any], results: list[dict[str, Any]], figure: str) -> str:
    """The report text from the per-reading results of :func:`evaluate`."""
    from benchlib.grid.readings import READINGS

    confidence = round(100 * spec["confidence"])
    swept = list(results[0]["readings"])
    diverged = list(dict.fromkeys(label for r in results for label in r.get("diverged", [])))
    columns = len(results[0]["taus"])
    criterion = criterion_text(spec["min_tau"], spec["min_columns"], columns)
    summary = [
        {
            "label": r["label"],
            "reproduces": reproduces(r["taus"], r["tests"], spec["min_tau"], spec["min_columns"]),
            "mean_tau": (
                float(r["taus"]["tau"].dropna().mean()) if r["taus"]["tau"].notna().any() else None
            ),
        }
        for r in results
    ]
    lines = [
        f"# {spec['title']}",
        "",
        f"**Scale of this run: {SCALES[spec['scale']]}.** {spec['scale_note']}".rstrip(),
        "",
        f"**{conclusion(summary, criterion)}**",
        "",
        *([diverged_cells_note(diverged), ""] if diverged else []),
        f"Readings swept ({len(results)} combinations; declared in "
        "`benchlib.grid.readings`, listed "
        "with the paper's words in docs/papers/readings.md; chosen before any run):",
        "",
    ]
    for name in swept:
        reading = READINGS.get(name)
        run = {r["readings"][name] for r in results}
        alternatives = [a.name for a in reading.alternatives if a.name in run]
        lines.append(
            f"- `{name}`, {reading.paper}: {reading.question} Alternatives run: "
            f"{', '.join(f'`{a}`' for a in alternatives)}; default `{reading.default}`."
        )
    seeds = ", ".join(map(str, spec["seeds_read"]))
    lines += [
        "",
        f"Paper: `{spec['paper_values_name']}`. Ours: mean over a column's cells (experiment x "
        f"seed; seeds {seeds}), each scored as paper_comparison scores it. Kendall's tau "
        "(tau-b): our order of the methods against the paper's, over the methods with a paper "
        f"value ({', '.join(spec['references']) or 'none'} left out as references); 1 = the "
        f"paper's order. {confidence} % CI: percentile bootstrap (seeded) of our mean over the "
        "cells. Order tests: each method against the next one the paper ranks below it, a "
        f"two-sided {PAIRED_TESTS[spec['test']].label} over the same cells; `agrees` = ours "
        f"ranks them as the paper does, `(significant)` = p < {ALPHA}. MSE: lower is better.",
        "",
        f"![ours per reading]({figure})",
        "",
        "## Kendall's tau per reading",
        "",
    ]
    column_keys = [tuple(k) for k in results[0]["taus"][KEYS].itertuples(index=False)]
    head = [f"{c} ({m})" for _, c, m in column_keys]
    lines += [
        "| reading | " + " | ".join(head) + " | mean tau | reproduces |",
        "|---|" + "---|" * (len(head) + 2),
    ]
    for result, row in zip(results, summary, strict=True):
        frame = result["taus"]
        taus = dict(zip(map(tuple, frame[KEYS].values.tolist()), frame["tau"], strict=True))
        cells = [_num(taus.get(key), 2) for key in column_keys]
        lines.append(
            f"| {result['label']} | " + " | ".join(cells) + f" | {_num(row['mean_tau'], 2)} | "
            f"{'yes' if row['reproduces'] else 'no'} |"
        )
    lines.append("")
    lines += _column_lines(results, confidence)
    lines += _order_lines(results)
    return "\n".join(lines)


def _column_lines(results: list[dict[str, Any]], confidence: int) -> list[str]:
    """Per column: one row per method, one column per reading (ours +- std and the CI)."""
    lines: list[str] = []
    first = results[0]["means"]
    for key, part in first.groupby(KEYS, sort=False):
        digits = _digits(key[2])
        lines += [
            f"## {key[0]}, {key[1]}: {key[2]}",
            "",
            f"Ours: mean +- std over the cells, {confidence} % CI below.",
            "",
            "| method | paper | " + " | ".join(r["label"] for r in results) + " |",
            "|---|---|" + "---|" * len(results),
        ]
        for method, paper in zip(part["method"], part["paper"], strict=True):
            cells = []
            for result in results:
                means, intervals = result["means"], result["intervals"]
                hit = means[(means[KEYS] == list(key)).all(axis=1) & (means["method"] == method)]
                ci = intervals[
                    (intervals[KEYS] == list(key)).all(axis=1) & (intervals["method"] == method)
                ]
                if hit.empty:
                    cells.append("-")
                    continue
                mean, std = hit["ours"].iloc[0], hit["ours_std"].iloc[0]
                mark = DIVERGED_SIGN if "diverged" in hit and hit["diverged"].iloc[0] else ""
                text = f"{_num(mean, digits)} +- {_num(std, digits)}{mark}"
                if len(ci):
                    low, high = ci["ci_low"].iloc[0], ci["ci_high"].iloc[0]
                    text += (
                        f" [{low:.{digits}f}, {high:.{digits}f}]"
                        if low is not None and low == low
                        else f" ({ci['ci_note'].iloc[0]})"
                    )
                cells.append(text)
            lines.append(f"| {method} | {_num(paper, digits)} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _order_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = [
        "## The paper's order, pair by pair",
        "",
        "Per column, each method against the next one the paper ranks below it: our gap in "
        "the paper's direction (positive = ours agrees), the pairs (cells), the paired "
        f"test's p, and the smallest true difference a two-sided paired t-test over these "
        f"pairs detects with {round(100 * POWER)} % power at p < {ALPHA} (from the pairs' "
        "observed spread): a gap below it that is not significant is no evidence either way.",
        "",
        "| reading | source | column | metric | paper: better > worse | gap | pairs | p | "
        "detectable | ours |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        for row in result["tests"].itertuples():
            p_text = row.note if row.p_value is None or row.p_value != row.p_value else None
            p_text = p_text or _num(row.p_value, 3)
            lines.append(
                f"| {result['label']} | {row.source} | {row.column} | {row.metric} | "
                f"{row.better} > {row.worse} | {_num(row.gap, _digits(row.metric))} | "
                f"{row.pairs} | {p_text} | {_num(row.detectable, _digits(row.metric))} | "
                f"{row.verdict} |"
            )
    return [*lines, ""]


def evaluate(
    spec: dict[str, Any], paper_values: pd.DataFrame, files: dict[str, Path]
) -> list[dict[str, Any]]:
    """Per reading combination: its label, readings, means, taus, intervals, order tests and
    the labels of its diverged cells."""
    from benchlib.report.statistics.inference import interval_frame

    results = []
    for combo in spec["combinations"]:
        columns = combo["columns"]
        paper = paper_by_config_method(paper_values, columns)
        cells, units = score_columns(columns, [files[n] for n in spec_inputs(columns)])
        means, taus = score(units, paper, spec["references"])
        intervals = interval_frame(units, KEYS, spec["confidence"], spec["resamples"])
        tests = order_tests(units, means, spec["references"], spec["test"])
        results.append(
            {
                "label": combo["label"],
                "readings": combo["readings"],
                "means": means,
                "taus": taus,
                "intervals": intervals,
                "tests": tests,
                "diverged": diverged_labels(cells),
            }
        )
    return results


def plot_readings(results: list[dict[str, Any]], title: str, pdf: Path) -> None:
    """One panel per column: ours per method (markers) for every reading (x), the paper's
    value as a dashed line per method."""
    from benchlib.report.figures import pyplot, save_figure

    plt = pyplot()
    first = results[0]["means"]
    keys = [tuple(k) for k in first[KEYS].drop_duplicates().itertuples(index=False)]
    figure, axes = plt.subplots(
        1, len(keys), figsize=(3.4 * len(keys), 3.6), squeeze=False, sharey=False
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x = list(range(len(results)))
    for ax, key in zip(axes[0], keys, strict=True):
        part = first[(first[KEYS] == list(key)).all(axis=1)]
        for index, (method, paper) in enumerate(zip(part["method"], part["paper"], strict=True)):
            colour = colours[index % len(colours)]
            ys = []
            for result in results:
                means = result["means"]
                hit = means[(means[KEYS] == list(key)).all(axis=1) & (means["method"] == method)]
                ys.append(float(hit["ours"].iloc[0]) if len(hit) else float("nan"))
            ax.plot(x, ys, marker="o", ms=3, lw=0.8, color=colour, label=method)
            if paper == paper:
                ax.axhline(paper, color=colour, lw=0.6, ls="--")
        ax.set_xticks(x)
        ticks = [", ".join(r["readings"].values()) for r in results]  # the alternatives only
        ax.set_xticklabels(ticks, rotation=60, ha="right", fontsize=6)
        ax.set_title(f"{key[1]} ({key[2]})", fontsize=8)
    axes[0][0].legend(fontsize="x-small")
    names = ", ".join(results[0]["readings"])
    figure.suptitle(f"{title} (x: {names}; dashed: paper)", fontsize=9)
    save_figure(figure, pdf)


@register_kind
class Readings(ReportKind):
    name = "readings"
    output = "markdown"
    params = Params(
        {
            "columns": Param(
                {"type": "array", "minItems": 1, "items": COLUMN_ENTRY},
                description="one entry per paper column {source, column, experiments, scope"
                "[, pooling, metrics, methods]}; experiments: ones that sweep readings",
                required=True,
            ),
            "title": Param({"type": "string"}, "Readings", "the report's heading"),
            "paper_values": Param(
                {"type": "string"},
                "config/paper_values/tfl.csv",
                "CSV of the paper's numbers (config/paper_values/)",
            ),
            "scale": Param({"enum": sorted(SCALES)}, "paper", "the scale of the runs"),
            "scale_note": Param({"type": "string"}, "", "one line on the run"),
            "references": Param(
                {"type": "array", "items": {"type": "string"}},
                [],
                "methods shown but left out of Kendall's tau and the order tests (e.g. ERM)",
            ),
            "seeds": Param(
                {"type": ["array", "null"], "items": {"type": "integer"}, "minItems": 1},
                None,
                "the seeds whose cells are read; null = every seed of the experiments",
            ),
            "test": Param(
                {"enum": sorted(PAIRED_TESTS)}, "paired_t", "paired test along the paper's order"
            ),
            "confidence": Param(
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                CONFIDENCE,
                "confidence level of the bootstrap interval",
            ),
            "resamples": Param(
                {"type": "integer", "minimum": 100, "maximum": MAX_RESAMPLES},
                RESAMPLES,
                "bootstrap resamples (seeded)",
            ),
            "min_tau": Param(
                {"type": "number", "minimum": -1, "maximum": 1},
                1.0,
                "a reading reproduces the paper when Kendall's tau reaches this ...",
            ),
            "min_columns": Param(
                {"type": ["integer", "null"], "minimum": 1},
                None,
                "... in at least this many columns (null = every column), with no pair adjacent "
                "in the paper's order significantly reversed",
            ),
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        values = resolve_input_path(params["paper_values"], "paper values")
        combos = _combination_specs(config, params, values)
        seeds = sorted({f["seed"] for c in combos for col in c["columns"] for f in col["files"]})
        return {
            "name": name,
            "paper_values": str(values),
            "paper_values_name": params["paper_values"],
            "combinations": combos,
            "seeds_read": seeds,
            **{
                key: params[key]
                for key in (
                    "title",
                    "scale",
                    "scale_note",
                    "references",
                    "test",
                    "confidence",
                    "resamples",
                    "min_tau",
                    "min_columns",
                )
            },
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        files = [n for c in spec["combinations"] for n in spec_inputs(c["columns"])]
        return [spec["paper_values"], *dict.fromkeys(files)]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.primitives.io import write_text_atomic

        check_outputs(self, outputs)
        names = self.inputs(spec)
        require(
            len(inputs) == len(names),
            f"the readings report reads {len(names)} files (the paper values, then the "
            f"cells'), got {len(inputs)}",
        )
        files = dict(zip(names[1:], [Path(p) for p in inputs[1:]], strict=True))
        results = evaluate(spec, read_table_values(Path(inputs[0])), files)
        pdf = Path(outputs[1])
        plot_readings(results, spec["title"], pdf)
        write_text_atomic(outputs[0], markdown(spec, results, pdf.name) + "\n")
