"""Rank methods over blocks: each block is one (experiment, malfunction, k, seed, grid axes) cell
of every method, its value the mean client test metric of that cell (as the tables average it).

- mean rank per method (rank 1 = best; ties share the average rank), following the metric's
  direction (:func:`benchlib.report.statistics.inference.is_lower_better`);
- the Friedman test over the blocks (``scipy.stats.friedmanchisquare``);
- a post-hoc test between every pair of methods (scikit-posthocs: Nemenyi, or Conover with
  Holm's correction) and the Nemenyi critical difference of the mean ranks;
- an aggregate score per method: the interquartile mean (IQM) of its block scores, with a
  percentile confidence interval from a bootstrap stratified by block (each resample draws every
  block's clients with replacement, the same draw for every method; seeded: reproducible).

A block where some method has no value is left out and listed, never dropped silently; too few
blocks or methods for a test give a note instead of a number.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from benchlib.primitives.errors import require

if TYPE_CHECKING:  # imported where used: the kind module is imported at workflow parse
    import numpy as np
    import pandas as pd

CELL_KEYS = ["experiment", "malfunction", "k", "seed"]
AXIS_PREFIX = "axis_"  # grid-axis columns of a variant experiment (benchlib.report.collect)
MIN_METHODS = 3  # the Friedman test compares at least three treatments
MIN_BLOCKS = 2
POSTHOC_TESTS = {"nemenyi": "Nemenyi", "conover": "Conover (Holm-adjusted)"}


def block_keys(collected: pd.DataFrame) -> list[str]:
    """The columns that make a block: the cell keys plus every grid-axis column present."""
    return [*CELL_KEYS, *sorted(c for c in collected.columns if c.startswith(AXIS_PREFIX))]


def block_label(keys: list[str], block: tuple, experiments: int = 1) -> str:
    """``ana k=3 seed=0`` (with the experiment first when several are ranked, axes last)."""
    values = dict(zip(keys, block, strict=True))
    parts = [values["experiment"]] if experiments > 1 else []
    parts += [str(values["malfunction"]), f"k={values['k']}", f"seed={values['seed']}"]
    parts += [f"{k.removeprefix(AXIS_PREFIX)}={values[k]}" for k in keys if k not in CELL_KEYS]
    return " ".join(parts)


@dataclass(frozen=True)
class Blocks:
    """Complete blocks: ``scores`` (blocks x methods, the block score of each method),
    ``clients`` (per block, its clients x methods values, for the bootstrap), the methods left
    out (no value in any block) and the blocks left out (one line each, with the reason)."""

    keys: list[str]
    scores: pd.DataFrame
    clients: list[np.ndarray]
    methods_left_out: list[str] = field(default_factory=list)
    blocks_left_out: list[str] = field(default_factory=list)
    # ranked blocks where a method's cell diverged (non-finite models): method -> block labels
    diverged: dict[str, list[str]] = field(default_factory=dict)

    @property
    def methods(self) -> list[str]:
        return list(self.scores.columns)

    @property
    def left_out(self) -> list[str]:
        """Every method and block left out, one line each."""
        methods = [f"method {m}: no value in any block; left out" for m in self.methods_left_out]
        return methods + self.blocks_left_out

    @property
    def seeds(self) -> list[Any]:
        return sorted(self.scores.index.get_level_values("seed").unique().tolist())


def make_blocks(collected: pd.DataFrame, methods: list[str], column: str) -> Blocks:
    """The blocks of ``collected`` (rows: one per cell x client) for ``methods``, in order.

    A method with no value in any block is left out; then a block where a remaining method has
    no value (no cell, or a NaN client value) is left out. Both are listed in the result.
    """
    import pandas as pd

    require(column in collected.columns, f"the collected results have no column {column!r}")
    keys = block_keys(collected)
    rows = collected[collected["method_id"].isin(methods)]
    rows = rows.assign(**{k: rows[k].fillna("") for k in keys if k.startswith(AXIS_PREFIX)})
    grouped = rows.groupby([*keys, "method_id"])[column]
    # a NaN client value makes the block score NaN (a plain mean would skip it)
    block_means = grouped.mean().where(~grouped.apply(lambda s: s.isna().any()))
    scores = block_means.unstack("method_id")
    present = [m for m in methods if m in scores.columns and scores[m].notna().any()]
    methods_left_out = [m for m in methods if m not in present]
    scores = scores.reindex(columns=present)
    experiments = rows["experiment"].nunique()
    blocks_left_out = []
    for block, row in scores.iterrows():
        missing = [m for m in present if row[m] != row[m]]
        if missing:
            label = block_label(keys, block, experiments)
            blocks_left_out.append(f"{label}: no value for {', '.join(missing)}; left out")
    complete = scores.dropna(how="any").sort_index()
    cells = dict(iter(rows.groupby(keys)))
    clients = [
        cells[block]
        .pivot_table(index="client", columns="method_id", values=column, aggfunc="mean")
        .reindex(columns=present)
        .to_numpy(dtype=float)
        for block in complete.index
    ]
    scores = complete.astype(float)
    scores.columns = pd.Index(present, name="method_id")
    diverged: dict[str, list[str]] = {}
    if "nonfinite" in rows:
        flagged = rows[rows["nonfinite"].fillna(0).astype(int) > 0]
        for (*block, method), _ in flagged.groupby([*keys, "method_id"]):
            if method in present and tuple(block) in complete.index:
                label = block_label(keys, tuple(block), experiments)
                diverged.setdefault(method, []).append(label)
    return Blocks(keys, scores, clients, methods_left_out, blocks_left_out, diverged)


# ------------------------------------------------------------------------------------- ranks
def rank_matrix(scores: pd.DataFrame, lower_is_better: bool) -> pd.DataFrame:
    """Per block the rank of each method, 1 = best, ties sharing their average rank."""
    import pandas as pd
    from scipy.stats import rankdata

    values = scores.to_numpy(dtype=float)
    ranks = rankdata(values if lower_is_better else -values, axis=1, method="average")
    return pd.DataFrame(ranks, index=scores.index, columns=scores.columns)


def mean_ranks(scores: pd.DataFrame, lower_is_better: bool) -> pd.Series:
    """Mean rank per method over the blocks (1 = best)."""
    return rank_matrix(scores, lower_is_better).mean(axis=0)


@dataclass(frozen=True)
class TestResult:
    """A test's statistic and p-value, or None for both and a ``note`` saying why."""

    statistic: float | None
    p_value: float | None
    note: str = ""


def too_few(methods: int, blocks: int) -> str:
    """Why the rank tests cannot run ('' when they can)."""
    reasons = []
    if methods < MIN_METHODS:
        reasons.append(f"{methods} method(s), the tests need at least {MIN_METHODS}")
    if blocks < MIN_BLOCKS:
        reasons.append(f"{blocks} block(s), the tests need at least {MIN_BLOCKS}")
    return "; ".join(reasons)


def friedman(scores: pd.DataFrame) -> TestResult:
    """The Friedman test that every method ranks alike (scipy, with its correction for ties)."""
    from scipy.stats import friedmanchisquare

    blocks, methods = scores.shape
    reason = too_few(methods, blocks)
    if reason:
        return TestResult(None, None, f"Friedman test not run: {reason}")
    if (scores.nunique(axis=1) == 1).all():  # no rank variance: the statistic is 0 / 0
        return TestResult(None, None, "Friedman test not run: every block ties every method")
    result = friedmanchisquare(*(scores[m].to_numpy(dtype=float) for m in scores.columns))
    return TestResult(float(result.statistic), float(result.pvalue))


def posthoc(scores: pd.DataFrame, lower_is_better: bool, test: str = "nemenyi") -> pd.DataFrame:
    """Methods x methods p-values of the pairwise post-hoc test over the blocks."""
    import scikit_posthocs as sp

    require(test in POSTHOC_TESTS, f"unknown post-hoc test {test!r}; one of {list(POSTHOC_TESTS)}")
    oriented = scores if lower_is_better else -scores  # rank 1 = best, as in mean_ranks
    if test == "nemenyi":
        return sp.posthoc_nemenyi_friedman(oriented)
    return sp.posthoc_conover_friedman(oriented, p_adjust="holm")


def nemenyi_q(methods: int, alpha: float = 0.05) -> float:
    """Demšar's (2006) q_alpha: the studentized range quantile over sqrt(2)."""
    import numpy as np
    from scipy.stats import studentized_range

    return float(studentized_range.ppf(1 - alpha, methods, np.inf) / np.sqrt(2))


def critical_difference(methods: int, blocks: int, alpha: float = 0.05) -> float:
    """The Nemenyi critical difference of mean ranks: q_alpha * sqrt(k (k + 1) / (6 N))."""
    return nemenyi_q(methods, alpha) * (methods * (methods + 1) / (6 * blocks)) ** 0.5


# ---------------------------------------------------------------------------- aggregate score
def iqm(values: Any, axis: int = 0) -> Any:
    """The interquartile mean: the mean of the middle half (``scipy.stats.trim_mean``, 25 %
    cut from each end; with fewer than 4 values nothing is cut)."""
    from scipy.stats import trim_mean

    return trim_mean(values, 0.25, axis=axis)


@dataclass(frozen=True)
class Aggregate:
    """Per method the IQM of its block scores and the bootstrap interval's ends."""

    point: pd.Series
    low: pd.Series
    high: pd.Series


def stratified_iqm(
    blocks: Blocks, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> Aggregate:
    """IQM of the block scores per method with a percentile CI from a bootstrap stratified by
    block: each resample draws every block's clients with replacement (one draw shared by all
    methods), recomputes the block scores and their IQM."""
    import numpy as np
    import pandas as pd

    methods = blocks.methods
    point = pd.Series(iqm(blocks.scores.to_numpy(dtype=float), axis=0), index=methods)
    rng = np.random.default_rng(seed)
    resampled = np.empty((resamples, len(blocks.clients), len(methods)))
    for b, values in enumerate(blocks.clients):
        draws = rng.integers(0, len(values), size=(resamples, len(values)))
        resampled[:, b, :] = values[draws].mean(axis=1)
    per_resample = iqm(resampled, axis=1)  # resamples x methods
    tail = 100 * (1 - confidence) / 2
    low = np.percentile(per_resample, tail, axis=0)
    high = np.percentile(per_resample, 100 - tail, axis=0)
    return Aggregate(point, pd.Series(low, index=methods), pd.Series(high, index=methods))


# --------------------------------------------------------------------------------- everything
@dataclass(frozen=True)
class Ranking:
    """Everything the ranking report shows."""

    blocks: Blocks
    lower_is_better: bool
    mean_ranks: pd.Series
    friedman: TestResult
    posthoc_test: str
    p_values: pd.DataFrame | None  # None when the tests cannot run
    cd: float | None
    alpha: float
    aggregate: Aggregate | None
    confidence: float

    @property
    def order(self) -> list[str]:
        """Methods from best to worst mean rank (ties in the given order)."""
        position = {m: i for i, m in enumerate(self.mean_ranks.index)}
        return sorted(self.mean_ranks.index, key=lambda m: (self.mean_ranks[m], position[m]))


def rank_methods(
    blocks: Blocks,
    lower_is_better: bool,
    alpha: float = 0.05,
    test: str = "nemenyi",
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Ranking:
    """Mean ranks, the Friedman test, the post-hoc test and CD, and the IQM with its CI."""
    import pandas as pd

    scores = blocks.scores
    n_blocks, n_methods = scores.shape
    if n_blocks == 0 or n_methods == 0:
        ranks = pd.Series(float("nan"), index=scores.columns, dtype=float)
        return Ranking(
            blocks,
            lower_is_better,
            ranks,
            TestResult(None, None, f"Friedman test not run: {too_few(n_methods, n_blocks)}"),
            test,
            None,
            None,
            alpha,
            None,
            confidence,
        )
    ranks = mean_ranks(scores, lower_is_better)
    result = friedman(scores)
    runnable = result.statistic is not None
    p_values = posthoc(scores, lower_is_better, test) if runnable else None
    cd = critical_difference(n_methods, n_blocks, alpha) if runnable else None
    aggregate = stratified_iqm(blocks, confidence, resamples, seed)
    return Ranking(
        blocks,
        lower_is_better,
        ranks,
        result,
        test,
        p_values,
        cd,
        alpha,
        aggregate,
        confidence,
    )
