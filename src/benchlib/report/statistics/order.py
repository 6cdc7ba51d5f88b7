"""How far two orders of the same methods agree: Kendall's tau-b, of one pair of orders and per
column of a paper-vs-ours frame (the paper comparisons and the readings report)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd


def tau_b(ours: list[float], paper: list[float]) -> float | None:
    """Kendall's tau-b of two orders (None for fewer than 2 values or no variation)."""
    from scipy.stats import kendalltau

    if len(ours) < 2:
        return None
    tau = kendalltau(ours, paper).statistic
    return None if tau != tau else float(tau)


def taus_by(frame: pd.DataFrame, keys: list[str], sort: bool = True) -> pd.DataFrame:
    """:func:`tau_b` of ``ours`` vs. ``paper`` per group of ``keys`` over the rows with a paper
    value: the keys, ``methods`` (how many were compared) and ``kendall_tau`` (None for fewer
    than 2 methods or no variation)."""
    import pandas as pd

    rows = []
    for key, group in frame.dropna(subset=["paper"]).groupby(keys, sort=sort):
        tau = tau_b(list(group["ours"]), list(group["paper"]))
        rows.append(dict(zip(keys, key, strict=True)) | {"methods": len(group), "kendall_tau": tau})
    return pd.DataFrame(rows, columns=[*keys, "methods", "kendall_tau"])
