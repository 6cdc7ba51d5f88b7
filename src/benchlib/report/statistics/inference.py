"""Statistics the papers do not give: a bootstrap 95 % confidence interval per table cell and, per
column, a paired test of whether the best method beats the second.

A cell's values are its *units*: one number per seed (and per client where the table averages
clients), keyed so that two methods' units pair up (same seed, same client). The interval is the
percentile bootstrap of the units' mean (``scipy.stats.bootstrap``, seeded: the same inputs give
the same interval). The test pairs the best and the second method's units over the keys both
have; :data:`PAIRED_TESTS` names the tests (default: the paired t-test). Too few units or pairs
give a clear "n too small" instead of a number.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchlib.primitives.errors import require

CONFIDENCE = 0.95
RESAMPLES = 9999
SEED = 0
# metrics where a lower value is better (every other metric: higher is better)
LOWER_IS_BETTER = frozenset({"mse", "mae", "rmse", "ece", "loss"})
TOO_FEW = "n too small"


@dataclass(frozen=True)
class Interval:
    """A bootstrap confidence interval of a mean over ``n`` units (``low``/``high`` None when
    ``n`` is too small for one; ``note`` says why)."""

    n: int
    low: float | None
    high: float | None
    note: str = ""


@dataclass(frozen=True)
class PairedResult:
    """Best vs. second method of one column: the test's name, the pairs it used, its statistic
    and two-sided p-value (None with a ``note`` when the test cannot run)."""

    test: str
    best: str
    second: str
    n: int
    statistic: float | None
    p_value: float | None
    note: str = ""


def bootstrap_ci(
    values: Sequence[float],
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Interval:
    """Percentile bootstrap interval of the mean of ``values`` (NaNs dropped), seeded."""
    import numpy as np
    from scipy.stats import bootstrap

    data = np.asarray([v for v in values if v == v], dtype=float)
    if len(data) < 2:
        return Interval(len(data), None, None, f"{TOO_FEW} (n = {len(data)})")
    if np.ptp(data) <= 1e-12 * max(1.0, float(np.abs(data).max())):  # every resample: one mean
        value = float(data[0])  # (not the mean: its float sum can differ in the last bit)
        return Interval(len(data), value, value, "all units equal")
    result = bootstrap(
        (data,),
        np.mean,
        n_resamples=resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    ci = result.confidence_interval
    return Interval(len(data), float(ci.low), float(ci.high))


def _paired_t(differences: Any) -> tuple[float, float]:
    from scipy.stats import ttest_1samp

    result = ttest_1samp(differences, 0.0)
    return float(result.statistic), float(result.pvalue)


def _wilcoxon(differences: Any) -> tuple[float, float]:
    from scipy.stats import wilcoxon

    result = wilcoxon(differences, zero_method="wilcox")
    return float(result.statistic), float(result.pvalue)


@dataclass(frozen=True)
class PairedTest:
    """A two-sided paired test on the differences of paired units; ``minimum`` non-zero pairs."""

    label: str
    minimum: int
    run: Callable[[Any], tuple[float, float]]


PAIRED_TESTS: dict[str, PairedTest] = {
    "paired_t": PairedTest("paired t-test", 2, _paired_t),
    "wilcoxon": PairedTest("Wilcoxon signed-rank", 6, _wilcoxon),
}


def paired_test(
    best: Mapping[Any, float], second: Mapping[Any, float], test: str = "paired_t"
) -> tuple[int, float | None, float | None, str]:
    """(pairs, statistic, p-value, note) of ``test`` on best - second over their common keys."""
    import numpy as np

    require(test in PAIRED_TESTS, f"unknown paired test {test!r}; one of {list(PAIRED_TESTS)}")
    chosen = PAIRED_TESTS[test]
    keys = [k for k in best if k in second and best[k] == best[k] and second[k] == second[k]]
    differences = np.asarray([best[k] - second[k] for k in keys], dtype=float)
    n = len(differences)
    nonzero = int(np.count_nonzero(differences))
    if n < 2 or nonzero < chosen.minimum:
        what = f"n = {n} pairs" if nonzero == n else f"n = {n} pairs, {nonzero} not tied"
        return n, None, None, f"{TOO_FEW} ({what}; {chosen.label} needs {chosen.minimum})"
    if np.ptp(differences) <= 1e-9 * max(1.0, float(np.abs(differences).max())):
        # equal up to float rounding: no variance to test (t would be rounding noise)
        return n, None, None, "every pair differs by the same amount (no variance to test)"
    statistic, p_value = chosen.run(differences)
    return n, statistic, p_value, ""


def ranked(means: Mapping[str, float], lower_is_better: bool) -> list[str]:
    """Method ids from best to worst by mean (NaN means left out; ties keep the given order)."""
    defined = [m for m, v in means.items() if v == v]
    return sorted(defined, key=lambda m: means[m] if lower_is_better else -means[m])


def best_vs_second(
    units: Mapping[str, Mapping[Any, float]],
    lower_is_better: bool = False,
    test: str = "paired_t",
) -> PairedResult | None:
    """The paired test of the column's best method (by mean over its units) against the second;
    None when the column has fewer than two methods with values."""
    import numpy as np

    means = {m: float(np.mean(list(v.values()))) if v else float("nan") for m, v in units.items()}
    order = ranked(means, lower_is_better)
    if len(order) < 2:
        return None
    best, second = order[0], order[1]
    n, statistic, p_value, note = paired_test(units[best], units[second], test)
    return PairedResult(PAIRED_TESTS[test].label, best, second, n, statistic, p_value, note)


def is_lower_better(metric: str) -> bool:
    return metric in LOWER_IS_BETTER


def format_interval(interval: Interval, scale: float = 1.0, digits: int = 1) -> str:
    """``[low, high]`` (times ``scale``) or the interval's note."""
    if interval.low is None or interval.high is None:
        return interval.note
    return f"[{scale * interval.low:.{digits}f}, {scale * interval.high:.{digits}f}]"


def format_test(result: PairedResult | None, alpha: float = 0.05) -> str:
    """One line: "best > second: <test>, n pairs, p = ..., significant / not significant"."""
    if result is None:
        return "fewer than two methods with values"
    head = f"{result.best} vs. {result.second}: {result.test}"
    if result.p_value is None:
        return f"{head}, {result.note}"
    verdict = "the order is significant" if result.p_value < alpha else "not significant"
    return f"{head}, n = {result.n} pairs, p = {result.p_value:.3g} ({verdict} at {alpha})"


# --------------------------------------------------------------- over a long frame of units
# A units frame has the columns ``keys`` (what one table column is), ``method``, ``unit`` (a
# hashable pairing key: (seed, client) or (experiment, seed)) and ``value``.
def interval_frame(
    units: Any, keys: list[str], confidence: float = CONFIDENCE, resamples: int = RESAMPLES
) -> Any:
    """Per (keys, method): units ``n``, ``ci_low``, ``ci_high`` and ``ci_note``."""
    import pandas as pd

    rows = []
    for key, part in units.groupby([*keys, "method"], sort=False):
        interval = bootstrap_ci(list(part["value"]), confidence, resamples)
        row = dict(zip([*keys, "method"], key, strict=True))
        rows.append(
            row
            | {"n": interval.n, "ci_low": interval.low, "ci_high": interval.high}
            | {"ci_note": interval.note}
        )
    return pd.DataFrame(rows, columns=[*keys, "method", "n", "ci_low", "ci_high", "ci_note"])


def test_frame(
    units: Any,
    keys: list[str],
    lower_is_better: Callable[[tuple], bool],
    test: str = "paired_t",
    exclude: Sequence[str] = (),
) -> Any:
    """Per column (``keys``): best and second method (``exclude``: methods left out, e.g. a
    centralised reference), the paired test and its one-line summary ``verdict``."""
    import pandas as pd

    rows = []
    kept = units[~units["method"].isin(list(exclude))]
    for key, part in kept.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        per_method = {
            method: dict(zip(cells["unit"], cells["value"], strict=True))
            for method, cells in part.groupby("method", sort=False)
        }
        result = best_vs_second(per_method, lower_is_better(key), test)
        row = dict(zip(keys, key, strict=True))
        row |= {
            "best": result.best if result else None,
            "second": result.second if result else None,
            "pairs": result.n if result else 0,
            "p_value": result.p_value if result else None,
            "verdict": format_test(result),
        }
        rows.append(row)
    return pd.DataFrame(rows, columns=[*keys, "best", "second", "pairs", "p_value", "verdict"])


# ------------------------------------------------------------- one-sided tests, Holm, power
@dataclass(frozen=True)
class OneSided:
    """A one-sided paired test of differences ``d`` (claimed direction: d > 0): the pairs, the
    statistic, p of "d > 0" (``p_greater``) and of "d < 0" (``p_less``); None with a ``note``
    when the test cannot run."""

    test: str
    n: int
    statistic: float | None
    p_greater: float | None
    p_less: float | None
    note: str = ""


def one_sided_test(differences: Sequence[float], test: str = "paired_t") -> OneSided:
    """Both one-sided p-values of ``test`` on ``differences`` (NaNs dropped); too few pairs or
    no variance give a note instead (the same limits as :func:`paired_test`)."""
    import numpy as np
    from scipy.stats import ttest_1samp, wilcoxon

    require(test in PAIRED_TESTS, f"unknown paired test {test!r}; one of {list(PAIRED_TESTS)}")
    chosen = PAIRED_TESTS[test]
    d = np.asarray([v for v in differences if v == v], dtype=float)
    n, nonzero = len(d), int(np.count_nonzero(d))
    if n < 2 or nonzero < chosen.minimum:
        what = f"n = {n} pairs" if nonzero == n else f"n = {n} pairs, {nonzero} not tied"
        note = f"{TOO_FEW} ({what}; {chosen.label} needs {chosen.minimum})"
        return OneSided(chosen.label, n, None, None, None, note)
    if np.ptp(d) <= 1e-9 * max(1.0, float(np.abs(d).max())):
        return OneSided(chosen.label, n, None, None, None, "every pair differs by the same amount")
    if test == "paired_t":
        greater, less = (
            ttest_1samp(d, 0.0, alternative="greater"),
            ttest_1samp(d, 0.0, alternative="less"),
        )
    else:
        greater = wilcoxon(d, zero_method="wilcox", alternative="greater")
        less = wilcoxon(d, zero_method="wilcox", alternative="less")
    return OneSided(
        chosen.label, n, float(greater.statistic), float(greater.pvalue), float(less.pvalue)
    )


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values (None stays None and is not counted)."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


def t_power(effect: float, sd: float, n: int, alpha: float) -> float:
    """Power of the one-sided one-sample t-test at level ``alpha`` with ``n`` pairs when the
    true mean difference is ``effect`` and its standard deviation ``sd`` (noncentral t)."""
    import math

    from scipy.stats import nct, t

    if n < 2 or sd <= 0:
        return float("nan")
    critical = t.ppf(1 - alpha, n - 1)
    return float(nct.sf(critical, n - 1, effect / sd * math.sqrt(n)))


def detectable_effect(sd: float, n: int, alpha: float, power: float) -> float | None:
    """The smallest mean difference the one-sided t-test detects with probability ``power``
    (n pairs, differences' sd ``sd``); None when n < 2 or sd is 0."""
    from scipy.optimize import brentq

    if n < 2 or not sd > 0:
        return None
    high = sd
    while t_power(high, sd, n, alpha) < power:
        high *= 2
    return float(brentq(lambda e: t_power(e, sd, n, alpha) - power, 0.0, high, xtol=1e-10 * sd))


def pairs_needed(
    effect: float, sd: float, alpha: float, power: float, limit: int = 100_000
) -> int | None:
    """The fewest pairs for which the one-sided t-test detects ``effect`` with ``power`` (sd
    ``sd``); None for a non-positive effect, sd 0 or more than ``limit`` pairs."""
    if not effect > 0 or not sd > 0:
        return None
    n = 2
    while t_power(effect, sd, n, alpha) < power:
        n = n * 2 if n < 64 else n + max(1, n // 8)
        if n > limit:
            return None
    low = max(2, n // 2)
    while low < n:  # the smallest n in (low, n] with enough power
        middle = (low + n) // 2
        if t_power(effect, sd, middle, alpha) >= power:
            n = middle
        else:
            low = middle + 1
    return n


POWER = 0.8


def detectable_difference(differences: list[float], alpha: float = 0.05, power: float = POWER):
    """The smallest true mean difference a two-sided paired t-test at ``alpha`` detects with
    probability ``power`` over ``len(differences)`` pairs whose differences have the observed
    standard deviation (ddof 1): delta with P(|T| > t_crit) = power, T noncentral t with n - 1
    degrees of freedom and noncentrality delta sqrt(n) / sd. None for fewer than 2 pairs."""
    import numpy as np
    from scipy.optimize import brentq
    from scipy.stats import nct, t

    n = len(differences)
    if n < 2:
        return None
    sd = float(np.std(differences, ddof=1))
    if sd == 0:
        return 0.0
    df = n - 1
    critical = float(t.ppf(1 - alpha / 2, df))

    def shortfall(effect: float) -> float:
        nc = effect * np.sqrt(n)
        return float(nct.sf(critical, df, nc) + nct.cdf(-critical, df, nc)) - power

    high = 1.0
    while shortfall(high) < 0:  # widen until the power is reached (large for very few pairs)
        high *= 2
        if high > 1e3 or shortfall(high) != shortfall(high):
            return None
    return sd * brentq(shortfall, 0.0, high)
