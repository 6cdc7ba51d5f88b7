"""Statistics of the LIGHTYEAR paper-vs-ours report (``paper_comparison`` with ``compare``): per
cell a bootstrap CI of our mean over its seeds x clients, per column (experiment, malfunction,
k) the paired test of our best method against our second over the same seeds x clients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchlib.report.statistics.inference import (
    Interval,
    format_interval,
    interval_frame,
    is_lower_better,
    test_frame,
)

if TYPE_CHECKING:
    import pandas as pd

LIGHTYEAR_KEYS = ["experiment", "malfunction", "k"]


def lightyear_units(collected: pd.DataFrame, experiments: list[dict[str, Any]]) -> pd.DataFrame:
    """One unit per (seed, client) of every cell the report compares: experiment, malfunction,
    k, method (the config's method id), unit and value (percent)."""
    import pandas as pd

    parts = []
    for exp in experiments:
        column = f"test_{exp['metric']}"
        rows = collected[(collected["experiment"] == exp["experiment"]) & (collected["k"] > 0)]
        rows = rows[rows["malfunction"].isin(exp["malfunctions"])].dropna(subset=[column])
        parts.append(
            pd.DataFrame(
                {
                    **{key: rows[key] for key in LIGHTYEAR_KEYS},
                    "method": rows["method_id"],
                    "unit": list(zip(rows["seed"], rows["client"], strict=True)),
                    "value": 100 * rows[column].astype(float),
                }
            )
        )
    return pd.concat(parts, ignore_index=True)


def lightyear_statistics(
    collected: pd.DataFrame, experiments: list[dict[str, Any]], options: dict[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(bootstrap CI per cell over seeds x clients, best vs. second per column)."""
    units = lightyear_units(collected, experiments)
    intervals = interval_frame(
        units,
        LIGHTYEAR_KEYS,
        options["confidence"],
        options["resamples"],
    )
    metric = {e["experiment"]: e["metric"] for e in experiments}
    tests = test_frame(
        units,
        LIGHTYEAR_KEYS,
        lambda key: is_lower_better(metric[key[0]]),
        options["test"],
    )
    return intervals, tests


def interval_text(intervals: pd.DataFrame, key: tuple, method: str) -> str:
    hit = intervals[
        (intervals[LIGHTYEAR_KEYS] == list(key)).all(axis=1) & (intervals["method"] == method)
    ]
    if hit.empty:
        return "-"
    row = hit.iloc[0]
    low, high = row["ci_low"], row["ci_high"]
    defined = low is not None and low == low
    return format_interval(
        Interval(int(row["n"]), low if defined else None, high if defined else None, row["ci_note"])
    )


def test_text(tests: pd.DataFrame, key: tuple) -> str:
    hit = tests[(tests[LIGHTYEAR_KEYS] == list(key)).all(axis=1)]
    return "-" if hit.empty else str(hit["verdict"].iloc[0])
