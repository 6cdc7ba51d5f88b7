"""A verdict per claim (``claims`` report kind): the claim's blocks read from the cells, the
one-sided paired test in the claimed direction with Holm's correction across the paper's claims,
the effect with its bootstrap CI and the design's power (the statistics are
:mod:`benchlib.report.statistics.inference`'s).

A block is one cell of the grid (experiment, malfunction, k, seed) where the claim's method and
the methods it is compared with all ran; its value per method is the cell's score (the tables'
mean client metric for scope ``clients``, the global model's pooled score for ``pooled``, the
held-out / in-federation clients' score for ``oof`` / ``if``). Its difference ``d`` is signed so
that ``d > 0`` is the claimed direction: ``beats``, the method minus the comparator (the best of
the compared methods in that block, or their mean); ``gap_grows``, that gain minus the gain in
the reference block (k = 0 of the same experiment and seed, or the reference group's
experiment at the same position and seed). A claim with any cell missing or diverged is "not
tested", never a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib.report.statistics.inference import (
    bootstrap_ci,
    detectable_effect,
    holm,
    one_sided_test,
    pairs_needed,
)

if TYPE_CHECKING:
    import pandas as pd

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED, UNTESTABLE = "not tested", "untestable"
# key of a cell's value: (experiment as the config lists it, malfunction, method id, k, seed)
Key = tuple[str, str, str, int, int]


@dataclass(frozen=True)
class CellValue:
    """One cell's score, whether its models diverged and its clients' mean train size."""

    value: float
    diverged: bool
    n_train: float | None


@dataclass
class Verdict:
    """One claim (per reading): its test's numbers and the verdict."""

    row: dict[str, Any]
    differences: list[float] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    sd: float | None = None
    statistic: float | None = None
    p: float | None = None
    p_against: float | None = None
    p_holm: float | None = None
    p_against_holm: float | None = None
    detectable: float | None = None
    seeds_needed: int | None = None
    samples_per_client: float | None = None
    note: str = ""
    verdict: str = NOT_TESTED


def key_text(key: Key) -> str:
    experiment, malfunction, method, k, seed = key
    return f"{experiment}/{malfunction}/{method}/k{k}/seed{seed}"


def parse_key(text: str) -> Key:
    """The key of :func:`key_text`'s ``experiment/malfunction/method/kK/seedS``."""
    experiment, malfunction, method, k, seed = text.split("/")
    return (experiment, malfunction, method, int(k[1:]), int(seed[4:]))


def as_key(value: list[Any]) -> Key:
    return (str(value[0]), str(value[1]), str(value[2]), int(value[3]), int(value[4]))


def block_cells(row: dict[str, Any], block: list[Any]) -> dict[str, Any]:
    """A compact block of the spec as the cells it compares: ``{"cells": {name: cell},
    "reference": {name: cell} or None}``, a cell ``[experiment, malfunction, method, k,
    seed]`` (method ``<name> (no cell)`` where the grid has none)."""

    def cells(experiment: str, malfunction: str, k: int, seed: int) -> dict[str, list[Any]]:
        out = {}
        for name in row["names"]:
            exp = row["source"].get(experiment, {}).get(name, experiment)
            method = row["ids"][exp].get(name, f"{name} (no cell)")
            out[name] = [exp, malfunction, method, k, seed]
        return out

    *here, ref = block
    return {"cells": cells(*here), "reference": None if ref is None else cells(*ref)}


# ------------------------------------------------------------------------ reading the cells
def percent(metric: str) -> bool:
    from benchlib.report.kinds.common.paper_tables import MACRO_METRICS
    from benchlib.report.statistics.table import PERCENT_METRICS

    return metric in PERCENT_METRICS | MACRO_METRICS


def client_values(collected: pd.DataFrame, metric: str) -> dict[Key, CellValue]:
    """Scope ``clients``: per cell the mean over its clients of ``test_<metric>`` (NaN when a
    client has none), as the robustness tables average them."""
    column = f"test_{metric}"
    if column not in collected:
        return {}
    keys = ["experiment", "malfunction", "method_id", "k", "seed"]
    flags = collected["nonfinite"].fillna(0) if "nonfinite" in collected else 0
    frame = collected.assign(_diverged=flags)
    out = {}
    for key, part in frame.groupby(keys, sort=False):
        values = part[column].astype(float)
        value = float(values.mean()) if values.notna().all() else float("nan")
        out[as_key(list(key))] = CellValue(
            value,
            bool((part["_diverged"].fillna(0).astype(float) > 0).any()),
            float(part["n_train"].mean()) if "n_train" in part else None,
        )
    return out


def pooled_values(collected: pd.DataFrame, metric: str) -> dict[Key, CellValue]:
    """Scope ``pooled``: per cell the global model's ``metric`` on the clients' pooled test
    sets (as FedAgain's figures)."""
    from benchlib.report.kinds.fedagain.fedagain_fig13 import pooled_metric

    if f"test_{metric}" not in collected and metric not in ("precision_macro", "recall_macro"):
        return {}
    pooled = pooled_metric(collected, metric)
    where = collected.groupby(["experiment", "method_id", "seed"])
    first = where[["malfunction", "k"]].first()
    flags = collected["nonfinite"].fillna(0) if "nonfinite" in collected else 0
    diverged = collected.assign(_d=flags > 0).groupby(["experiment", "method_id", "seed"])["_d"]
    diverged = diverged.any()
    sizes = where["n_train"].mean() if "n_train" in collected else None
    out = {}
    for row in pooled.itertuples(index=False):
        cell = (row.experiment, row.method_id, row.seed)
        malfunction, k = first.loc[cell, "malfunction"], first.loc[cell, "k"]
        key = as_key([row.experiment, malfunction, row.method_id, k, row.seed])
        out[key] = CellValue(
            float(row.value),
            bool(diverged[cell]),
            float(sizes[cell]) if sizes is not None else None,
        )
    return out


def scope_value(path: Path, scope: str, metric: str, pooling: str) -> CellValue:
    """Scope ``oof`` / ``if``: one metrics.json scored as TFL's tables score it."""
    from benchlib.report.kinds.common.history import read_metrics
    from benchlib.report.kinds.tfl.runs import SCOPES, cell_value

    metrics = read_metrics(path)
    history = metrics.get("history")
    clients = metrics.get(SCOPES[scope]) or []
    sizes = [c["n_train"] for c in metrics.get("clients", []) if c.get("n_train")]
    return CellValue(
        cell_value(metrics, scope, f"test_{metric}", str(path), pooling),
        isinstance(history, dict) and bool(history.get("nonfinite")),
        float(sum(sizes) / len(sizes)) if sizes and clients else None,
    )


# ------------------------------------------------------------------------------ the verdicts
def signed_gain(values: dict[str, float], claimed: str, against: list[str], row: dict) -> float:
    """The claimed method's lead over the comparator, positive in the claimed direction."""
    higher = row["direction"] == "higher"
    others = [values[m] for m in against]
    if row["test"]["comparator"] == "mean":
        comparator = sum(others) / len(others)
    else:
        comparator = max(others) if higher else min(others)
    lead = values[claimed] - comparator
    return lead if higher else -lead


def block_difference(
    block: dict[str, Any], row: dict[str, Any], values: dict[Key, CellValue], verdict: Verdict
) -> float | None:
    """The block's signed difference, or None (with the cells listed) when a cell is missing or
    diverged."""

    def gain(cells: dict[str, list[Any]]) -> float | None:
        scores = {}
        for name, raw in cells.items():  # every missing or diverged cell is listed
            key = as_key(raw)
            found = values.get(key)
            if found is None or found.value != found.value:
                verdict.missing.append(key_text(key))
            elif found.diverged:
                verdict.diverged.append(key_text(key))
            else:
                scores[name] = found.value * (100.0 if percent(row["metric"]) else 1.0)
        if len(scores) < len(cells):
            return None
        names = [n for n in cells if n != row["method"]]
        return signed_gain(scores, row["method"], names, row)

    cells = block_cells(row, block)
    lead = gain(cells["cells"])
    if lead is None:
        return None
    if cells["reference"] is None:
        return lead
    base = gain(cells["reference"])
    return None if base is None else lead - base


def judge(row: dict[str, Any], values: dict[Key, CellValue], options: dict[str, Any]) -> Verdict:
    """The test of one claim row (before Holm): differences, effect, CI, p-values, power."""
    import numpy as np

    verdict = Verdict(row)
    if "untestable" in row:
        verdict.verdict, verdict.note = UNTESTABLE, row["untestable"]
        return verdict
    if row["status"]:
        verdict.note = row["status"]
        return verdict
    for block in row["blocks"]:
        d = block_difference(block, row, values, verdict)
        if d is not None:
            verdict.differences.append(d)
    sizes = [
        values[as_key(raw)].n_train
        for block in row["blocks"]
        for raw in block_cells(row, block)["cells"].values()
        if as_key(raw) in values and values[as_key(raw)].n_train is not None
    ]
    verdict.samples_per_client = float(np.mean(sizes)) if sizes else None
    if verdict.missing or verdict.diverged:
        verdict.note = "cells missing or diverged (listed below)"
        return verdict
    if not verdict.differences:
        verdict.note = "no block"
        return verdict
    d = verdict.differences
    verdict.effect = float(np.mean(d))
    interval = bootstrap_ci(d, options["confidence"], options["resamples"], options["seed"])
    verdict.ci_low, verdict.ci_high = interval.low, interval.high
    verdict.sd = float(np.std(d, ddof=1)) if len(d) > 1 else None
    test = one_sided_test(d, row["test"]["statistic"])
    verdict.statistic, verdict.p, verdict.p_against = test.statistic, test.p_greater, test.p_less
    verdict.note = test.note
    alpha, power = options["alpha"], options["power"]
    if verdict.sd:
        verdict.detectable = detectable_effect(verdict.sd, len(d), alpha, power)
        paper = row["paper_effect"]
        if paper is not None:
            pairs = pairs_needed(paper["value"], verdict.sd, alpha, power)
            per_seed = len(d) / max(1, len(row["seeds"]))
            verdict.seeds_needed = None if pairs is None else math.ceil(pairs / per_seed)
    verdict.verdict = INCONCLUSIVE
    return verdict


def judge_all(
    rows: list[dict[str, Any]], values: list[dict[Key, CellValue]], options: dict[str, Any]
) -> list[Verdict]:
    """Every row's verdict (``values``: per row, its cells' values), Holm's correction applied
    across the rows of one reading."""
    verdicts = [judge(row, found, options) for row, found in zip(rows, values, strict=True)]
    readings = list(dict.fromkeys(v.row["reading"] for v in verdicts))
    for reading in readings:
        family = [v for v in verdicts if v.row["reading"] == reading]
        for v, p, q in zip(
            family,
            holm([v.p for v in family]),
            holm([v.p_against for v in family]),
            strict=True,
        ):
            v.p_holm, v.p_against_holm = p, q
            if v.verdict != INCONCLUSIVE:
                continue
            if p is not None and p < options["alpha"]:
                v.verdict = SUPPORTED
            elif q is not None and q < options["alpha"]:
                v.verdict = CONTRADICTED
    return verdicts
