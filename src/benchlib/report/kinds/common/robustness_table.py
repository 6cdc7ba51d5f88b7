"""LIGHTYEAR-style robustness table (paper Tables 2-21): methods as rows, number of malfunctioning
clients k as columns, cells ``mean $\\pm$ std`` across clients of one per-client test metric
(default accuracy, in percent).

Every experiment yields one per malfunction, named ``<experiment>_<malfunction>`` (none with
``default_reports: false``). Config entry::

    reports:
      ultrasound_ana: {kind: robustness_table, experiment: ultrasound, malfunction: ana,
                       metric: dice}
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib import __version__
from benchlib.declarations.params import Param, Params
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
    method_rows,
    register_kind,
    required_param,
    spec_value,
)
from benchlib.report.statistics.inference import TOO_FEW, Interval, is_lower_better
from benchlib.report.statistics.table import (
    DIVERGED_MARK,
    METRIC_PARAMS,
    MetricDisplay,
    diverged_note,
    metric_display,
)

if TYPE_CHECKING:
    import pandas as pd

    from benchlib.report.base import ReportConfig

LOG = logging.getLogger("benchlib")


def render_table(
    collected: pd.DataFrame,
    experiment: str,
    malfunction: str,
    methods: list[tuple[str, str]],
    ks: list[int],
    title: str,
    num_clients: int,
    note: str = "",
    display: MetricDisplay | None = None,
    name: str | None = None,
    statistics: dict[str, Any] | None = None,
) -> str:
    """The LaTeX source of one table. ``methods`` is [(method_id, label)] in row order;
    ``statistics`` (``{test, confidence, resamples}``) adds a bootstrap CI to every cell and a
    best-vs-second row (:func:`table_statistics`)."""
    from benchlib.report.latex import render_template
    from benchlib.report.statistics.table import check_metric, summarise, table_rows

    display = display or MetricDisplay.resolve()
    name = name or f"{experiment}_{malfunction}"
    rows = table_rows(collected, experiment, malfunction)
    require(not rows.empty, f"no collected results for {experiment}/{malfunction}")
    check_metric(rows, display.metric, f"table {name}")
    stats = summarise(rows, metric=display.metric).set_index(["method_id", "k"])
    intervals, tests = (
        table_statistics(rows, display, statistics) if statistics is not None else ({}, {})
    )
    body = []
    diverged = 0
    for method_id, label in methods:
        if not any((method_id, k) in stats.index for k in ks):
            LOG.warning("table %s: no results for method %s; row left out", name, method_id)
            continue
        cells = []
        for k in ks:
            require(
                (method_id, k) in stats.index,
                f"table {name}: missing result for method {method_id}, k={k}",
            )
            cell = display.mean_std(
                stats.at[(method_id, k), "mean"], stats.at[(method_id, k), "std"]
            )
            if stats.at[(method_id, k), "diverged"]:
                cell += DIVERGED_MARK
                diverged += int(stats.at[(method_id, k), "diverged"])
            if statistics is not None:
                cell += f" {{\\scriptsize {intervals.get((method_id, k), '')}}}"
            cells.append(cell)
        body.append({"label": label, "cells": cells})
    seeds = sorted(rows["seed"].unique().tolist())
    return render_template(
        "robustness_table.tex.j2",
        version=__version__,
        name=name,
        experiment=experiment,
        malfunction=malfunction,
        title=title,
        ks=ks,
        rows=body,
        num_clients=num_clients,
        seeds=seeds,
        note=note,
        metric_label=display.label,
        percent=display.percent,
        test_row=[tests.get(k, "-") for k in ks] if statistics is not None else [],
        statistics_note=_statistics_note(statistics, display) if statistics is not None else "",
        diverged_note=diverged_note(diverged),
    )


def table_statistics(
    rows: pd.DataFrame, display: MetricDisplay, options: dict[str, Any]
) -> tuple[dict[tuple[str, int], str], dict[int, str]]:
    """({(method_id, k): "[low, high]"}, {k: best vs. second as TeX}): a percentile bootstrap
    CI over the cell's seeds x clients and, per k, the paired test of the best method against
    the second over the same seeds x clients."""
    import pandas as pd

    from benchlib.report.latex import tex_escape
    from benchlib.report.statistics.inference import (
        format_interval,
        interval_frame,
        test_frame,
    )

    values = rows[display.column].astype(float)
    units = pd.DataFrame(
        {
            "k": rows["k"],
            "method": rows["method_id"],
            "unit": list(zip(rows["seed"], rows["client"], strict=True)),
            "value": [display.scale(v) for v in values],
        }
    ).dropna(subset=["value"])
    frame = interval_frame(units, ["k"], options["confidence"], options["resamples"])
    intervals = {}
    for row in frame.itertuples():
        interval = Interval(row.n, *_defined(row.ci_low, row.ci_high), row.ci_note)
        intervals[(row.method, int(row.k))] = tex_escape(
            format_interval(interval, digits=display.decimals)
        )
    lower = is_lower_better(display.metric)
    tests = test_frame(units, ["k"], lambda _: lower, options["test"])
    summary = {}
    for row in tests.itertuples():
        if row.p_value is None or row.p_value != row.p_value:
            summary[int(row.k)] = TOO_FEW if TOO_FEW in row.verdict else "no difference"
        else:
            summary[int(row.k)] = f"p = {row.p_value:.2g}"
    return intervals, summary


def _defined(low: Any, high: Any) -> tuple[float | None, float | None]:
    return (None, None) if low is None or low != low else (float(low), float(high))


def _statistics_note(options: dict[str, Any], display: MetricDisplay) -> str:
    from benchlib.report.statistics.inference import PAIRED_TESTS

    confidence = round(100 * options["confidence"])
    direction = "lower" if is_lower_better(display.metric) else "higher"
    return (
        f"Brackets: {confidence} % percentile-bootstrap confidence interval of the cell's mean "
        "over seeds x clients (seeded). Last row: two-sided "
        f"{PAIRED_TESTS[options['test']].label} of the column's best method against the "
        f"second, paired over seeds x clients ({direction} is better)."
    )


@register_kind
class RobustnessTable(ReportKind):
    name = "robustness_table"
    output = "table"
    params = Params(
        {
            "experiment": required_param({"type": "string"}, "an experiment of the config"),
            "malfunction": required_param({"type": "string"}, "one of its malfunctions"),
            "title": derived_param(
                {"type": "string"}, "caption title", "'<experiment title> -- <MALFUNCTION>'"
            ),
            **METRIC_PARAMS,
            "ci": Param(
                {"type": "boolean"},
                False,
                "add a bootstrap CI to every cell and a best-vs-second test row",
            ),
            "test": Param(
                {"enum": ["paired_t", "wilcoxon"]},
                "paired_t",
                "with ci: the paired test of each column's best method vs. the second",
            ),
            "confidence": Param(
                {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                0.95,
                "with ci: the confidence level of the intervals",
            ),
            "resamples": Param(
                {"type": "integer", "minimum": 100, "maximum": MAX_RESAMPLES},
                9999,
                "with ci: bootstrap resamples (seeded: reproducible)",
            ),
        }
    )

    def implicit(self, config: ReportConfig) -> dict[str, dict[str, Any]]:
        return {
            f"{e}_{m}": {"experiment": e, "malfunction": m}
            for e, exp in config.experiments.items()
            if exp["default_reports"]
            for m in exp["malfunctions"]
        }

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiment, malfunction = params["experiment"], params["malfunction"]
        check_experiments(config, [experiment])
        check_malfunctions(config, experiment, [malfunction])
        exp = config.experiments[experiment]
        title = params["title"]
        if title is None:
            title = f"{experiment_title(config, experiment)} -- {malfunction.upper()}"
        return {
            "name": name,
            "experiment": experiment,
            "malfunction": malfunction,
            "methods": method_rows(config, experiment),
            "k": exp["k"],
            "title": title,
            "clients": config.datasets[exp["dataset"]]["clients"],
            "note": exp["caption_note"],
            **metric_display(params).as_spec(),
            **(
                {"statistics": {key: params[key] for key in ("test", "confidence", "resamples")}}
                if params["ci"]
                else {}
            ),
        }

    def inputs(self, spec: dict[str, Any]) -> list[str]:
        return [layout.collected_csv(spec["experiment"], spec["malfunction"])]

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        import pandas as pd

        from benchlib.primitives.io import write_text_atomic

        check_outputs(self, outputs)
        require(len(inputs) == 1, "robustness_table reads one collected CSV; pass --collected CSV")
        text = render_table(
            pd.read_csv(inputs[0]),
            spec_value(spec, "experiment"),
            spec_value(spec, "malfunction"),
            [tuple(m) for m in spec_value(spec, "methods")],
            spec_value(spec, "k"),
            spec_value(spec, "title"),
            spec_value(spec, "clients"),
            spec["note"],
            MetricDisplay.from_spec(spec),
            spec.get("name"),
            spec.get("statistics"),
        )
        write_text_atomic(outputs[0], text)
