"""The report statistics (benchlib.report.statistics.inference) against values computed by hand: the
bootstrap interval of tiny samples, the paired t-test from its formula, and the too-small cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import bootstrap

from benchlib.report.statistics.inference import (
    TOO_FEW,
    best_vs_second,
    bootstrap_ci,
    format_interval,
    format_test,
    paired_test,
)


def test_bootstrap_of_two_values_spans_them() -> None:
    # resampled means of {1, 3}: 1 (p 1/4), 2 (1/2), 3 (1/4); the 2.5 % and 97.5 % quantiles
    # of that distribution are 1 and 3
    interval = bootstrap_ci([1.0, 3.0])
    assert (interval.n, interval.low, interval.high) == (2, 1.0, 3.0)
    assert format_interval(interval, scale=100, digits=0) == "[100, 300]"


def test_bootstrap_matches_scipy_and_is_deterministic() -> None:
    values = [0.61, 0.70, 0.55, 0.66, 0.72, 0.58]
    direct = bootstrap(
        (np.array(values),), np.mean, n_resamples=9999, method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval  # fmt: skip
    interval = bootstrap_ci(values)
    assert (interval.low, interval.high) == (pytest.approx(direct.low), pytest.approx(direct.high))
    assert bootstrap_ci(values) == interval  # seeded: the same interval every time
    assert interval.low < np.mean(values) < interval.high
    assert min(values) <= interval.low and interval.high <= max(values)


def test_bootstrap_too_small_and_constant() -> None:
    assert bootstrap_ci([0.5]).low is None and TOO_FEW in bootstrap_ci([0.5]).note
    assert format_interval(bootstrap_ci([])) == f"{TOO_FEW} (n = 0)"
    constant = bootstrap_ci([0.4, 0.4, 0.4])
    assert (constant.low, constant.high) == (0.4, 0.4)


def test_paired_t_from_the_formula() -> None:
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 2 sqrt 3, df 2;
    # Student t with 2 df: F(t) = 1/2 + t / (2 sqrt(2 + t^2)), two-sided p = 1 - t / sqrt(2 + t^2)
    best = {("s0", 0): 2.0, ("s0", 1): 4.0, ("s1", 0): 6.0}
    second = {("s0", 0): 1.0, ("s0", 1): 2.0, ("s1", 0): 3.0, ("s1", 1): 9.0}  # one unpaired key
    n, t, p, note = paired_test(best, second)
    assert n == 3 and note == ""
    assert t == pytest.approx(2 * math.sqrt(3))
    assert p == pytest.approx(1 - t / math.sqrt(2 + t * t))  # 0.0742
    # df 1 (differences 1 and 3: t = 2): Cauchy, p = 1 - 2 atan(2) / pi = 0.2952
    n, t, p, _ = paired_test({0: 1.0, 1: 3.0}, {0: 0.0, 1: 0.0})
    assert (n, t) == (2, pytest.approx(2.0)) and p == pytest.approx(1 - 2 * math.atan(2) / math.pi)


def test_paired_test_too_few_or_tied() -> None:
    n, t, p, note = paired_test({0: 1.0}, {0: 0.0})
    assert (n, t, p) == (1, None, None) and TOO_FEW in note
    n, t, p, note = paired_test({0: 1.0, 1: 2.0}, {0: 1.0, 1: 2.0})  # every pair tied
    assert p is None and "0 not tied" in note
    _, _, p, note = paired_test({0: 2.0, 1: 3.0}, {0: 1.0, 1: 2.0})  # constant difference
    assert p is None and "same amount" in note
    _, _, p, note = paired_test({i: float(i) + 1 for i in range(5)}, {i: 0.0 for i in range(5)},
                                "wilcoxon")  # fmt: skip
    assert p is None and "Wilcoxon signed-rank needs 6" in note


def test_wilcoxon_exact_p() -> None:
    # 6 positive differences with distinct magnitudes: W- = 0, exact two-sided p = 2 / 2^6
    zeros = {i: 0.0 for i in range(6)}
    _, w, p, _ = paired_test({i: 10.0 + i for i in range(6)}, zeros, "wilcoxon")
    assert w == 0.0 and p == pytest.approx(2 / 64)


def test_best_vs_second_respects_direction() -> None:
    units = {
        "fedavg": {0: 0.50, 1: 0.52, 2: 0.55},
        "tfl": {0: 0.40, 1: 0.45, 2: 0.44},
        "drfa": {0: 0.60, 1: 0.61, 2: 0.70},
    }
    lower = best_vs_second(units, lower_is_better=True)  # MSE: tfl best, fedavg second
    assert (lower.best, lower.second, lower.n) == ("tfl", "fedavg", 3)
    # differences -0.10, -0.07, -0.11: mean -0.0933, sd 0.0208, t = -7.77
    d = np.array([-0.10, -0.07, -0.11])
    assert lower.statistic == pytest.approx(d.mean() / (d.std(ddof=1) / math.sqrt(3)))
    higher = best_vs_second(units)
    assert (higher.best, higher.second) == ("drfa", "fedavg")
    assert "paired t-test, n = 3 pairs, p = " in format_test(higher)
    assert best_vs_second({"fedavg": {0: 1.0}}) is None
    assert format_test(best_vs_second({"a": {0: 1.0}, "b": {0: 0.0}})).endswith(
        "n too small (n = 1 pairs; paired t-test needs 2)"
    )


# ------------------------------------------------------- robustness tables with ci: true
def test_robustness_table_ci_option_by_hand() -> None:
    """femnist_sample's golden ANA table with ``ci``: every cell gains the bootstrap interval of
    its clients, the last row the paired test of the column's best method vs. the second."""
    import pandas as pd
    from conftest import REPO

    from benchlib.configuration.config import load_config_file
    from benchlib.report.kinds.common.robustness_table import render_table
    from benchlib.report.statistics.table import MetricDisplay

    raw = load_config_file(REPO / "config" / "femnist_sample.yaml")
    experiment = raw["experiments"]["femnist_sample"]
    methods = [(m, raw["methods"][m]["label"]) for m in experiment["methods"]]
    collected = pd.read_csv(REPO / "tests" / "golden" / "femnist_sample_collected.csv")
    options = {"test": "paired_t", "confidence": 0.95, "resamples": 9999}
    args = (collected, "femnist_sample", "ana", methods, experiment["k"], "T", 8)
    text = render_table(*args, "", MetricDisplay.resolve(), "t", options)
    plain = render_table(*args, "", MetricDisplay.resolve(), "t")
    assert "Best vs" not in plain and "bootstrap" not in plain  # off by default
    assert "percentile-bootstrap confidence interval" in text and "paired t-test" in text
    ana = collected[collected.malfunction == "ana"]
    k1 = ana[ana.k == 1]
    fedavg = k1[k1.method_id == "fedavg"].sort_values(["seed", "client"])
    direct = bootstrap(
        (100 * fedavg.test_accuracy.to_numpy(),), np.mean, n_resamples=9999,
        method="percentile", rng=np.random.default_rng(0),
    ).confidence_interval  # fmt: skip
    fedavg_line = next(line for line in text.splitlines() if line.startswith(methods[0][1]))
    cell = fedavg_line.split(" & ")[2]
    assert cell.endswith(f"{{\\scriptsize [{direct.low:.1f}, {direct.high:.1f}]}}")
    # k = 1: the best and second method by mean, differences paired by (seed, client)
    means = k1.groupby("method_id").test_accuracy.mean().sort_values(ascending=False)
    best, second = (
        k1[k1.method_id == m].set_index(["seed", "client"]).test_accuracy for m in means.index[:2]
    )
    d = 100 * (best - second.reindex(best.index)).to_numpy()
    t_value = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    from scipy.stats import t as student_t

    p_value = 2 * student_t.sf(abs(t_value), df=len(d) - 1)
    test_line = next(line for line in text.splitlines() if line.startswith("Best vs"))
    assert test_line.split(" & ")[2] == f"p = {p_value:.2g}"
