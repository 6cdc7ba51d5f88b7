"""benchlib.report.statistics.ranking: blocks from collected rows, mean ranks with ties, the
Friedman test, the Nemenyi q and critical difference against Demšar's table, the post-hoc p-values,
and the IQM with its seeded bootstrap stratified by block. Expected values are computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from benchlib.report.statistics.ranking import (
    Blocks,
    critical_difference,
    friedman,
    iqm,
    make_blocks,
    mean_ranks,
    nemenyi_q,
    posthoc,
    rank_methods,
    stratified_iqm,
)

# Demšar (2006), Table 5: q_alpha of the two-tailed Nemenyi test, k = 2..10 methods
Q_005 = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]
Q_010 = [1.645, 2.052, 2.291, 2.459, 2.589, 2.693, 2.780, 2.855, 2.920]


def scores(rows: list[list[float]], methods: str = "ABC") -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples(
        [("e", "ana", k, 0) for k in range(len(rows))],
        names=["experiment", "malfunction", "k", "seed"],
    )
    return pd.DataFrame(rows, index=index, columns=list(methods))


# three blocks with ties: block 0 ties B and C, block 2 ties all three
TIED = scores([[0.9, 0.8, 0.8], [0.7, 0.9, 0.6], [0.5, 0.5, 0.5]])


# ------------------------------------------------------------------------------------- ranks
def test_mean_ranks_with_ties_higher_is_better():
    # ranks (1 = best): (1, 2.5, 2.5), (2, 1, 3), (2, 2, 2)
    ranks = mean_ranks(TIED, lower_is_better=False)
    assert ranks.to_dict() == pytest.approx({"A": 5 / 3, "B": 5.5 / 3, "C": 7.5 / 3})


def test_mean_ranks_follow_a_lower_is_better_metric():
    # ranks: (3, 1.5, 1.5), (2, 3, 1), (2, 2, 2)
    ranks = mean_ranks(TIED, lower_is_better=True)
    assert ranks.to_dict() == pytest.approx({"A": 7 / 3, "B": 6.5 / 3, "C": 4.5 / 3})


# ---------------------------------------------------------------------------------- Friedman
def test_friedman_statistic_by_hand_without_ties():
    # ranks per block (1, 2, 3), (1, 3, 2), (1, 2, 3), (2, 1, 3): rank sums 5, 8, 11;
    # chi2 = 12 / (N k (k + 1)) * sum R^2 - 3 N (k + 1) = 12 / 48 * 210 - 48 = 4.5, 2 dof
    matrix = scores([[3, 2, 1], [3, 1, 2], [9, 5, 4], [5, 6, 1]])
    result = friedman(matrix)
    assert result.statistic == pytest.approx(4.5)
    assert result.p_value == pytest.approx(math.exp(-4.5 / 2))  # chi2(2) survival


def test_friedman_statistic_by_hand_with_ties():
    # rank sums 5, 5.5, 7.5 (N = 3, k = 3): uncorrected 12 / 36 * 111.5 - 36 = 7 / 6; ties:
    # one pair (2^3 - 2 = 6) and one triple (24), correction 1 - 30 / (N (k^3 - k)) = 7 / 12
    result = friedman(TIED)
    assert result.statistic == pytest.approx((7 / 6) / (7 / 12))
    assert result.statistic == pytest.approx(2.0)
    assert result.p_value == pytest.approx(math.exp(-1.0))


def test_friedman_says_why_it_cannot_run():
    two_methods = friedman(TIED[["A", "B"]])
    assert two_methods.statistic is None and two_methods.p_value is None
    assert "2 method(s), the tests need at least 3" in two_methods.note
    one_block = friedman(TIED.iloc[:1])
    assert "1 block(s), the tests need at least 2" in one_block.note
    all_tied = friedman(scores([[1, 1, 1], [2, 2, 2]]))
    assert all_tied.statistic is None and "every block ties every method" in all_tied.note


# ------------------------------------------------------------------------ Nemenyi and the CD
@pytest.mark.parametrize(("alpha", "table"), [(0.05, Q_005), (0.10, Q_010)])
def test_nemenyi_q_matches_demsar_table(alpha, table):
    for methods, expected in enumerate(table, start=2):
        assert nemenyi_q(methods, alpha) == pytest.approx(expected, abs=1e-3)


def test_critical_difference_for_known_k_and_n():
    # k = 4 methods, N = 29 blocks (the demo): 2.569 * sqrt(4 * 5 / (6 * 29)) = 0.8710
    assert critical_difference(4, 29) == pytest.approx(2.569 * math.sqrt(20 / 174), abs=5e-4)
    assert critical_difference(4, 29) == pytest.approx(0.8710, abs=5e-4)
    # k = 10, N = 13 (the femnist sample): 3.164 * sqrt(110 / 78) = 3.757
    assert critical_difference(10, 13) == pytest.approx(3.757, abs=1e-3)


def test_nemenyi_p_values_agree_with_the_critical_difference():
    rng = np.random.default_rng(3)
    matrix = scores(rng.normal(size=(12, 4)) + np.array([0.0, 0.4, 0.8, 1.6]), "ABCD")
    p = posthoc(matrix, lower_is_better=False)
    ranks = mean_ranks(matrix, lower_is_better=False)
    cd = critical_difference(4, 12)
    assert (np.diag(p) == 1).all() and np.allclose(p, p.T)
    for a in "ABCD":
        for b in "ABCD":
            if a != b:  # a pair differs at alpha = 0.05 exactly when its ranks are > CD apart
                assert (p.at[a, b] < 0.05) == (abs(ranks[a] - ranks[b]) > cd)
    assert (p.to_numpy() < 0.05).any()


def test_conover_is_holm_adjusted_and_symmetric():
    rng = np.random.default_rng(4)
    matrix = scores(rng.normal(size=(10, 3)) + np.array([0.0, 0.5, 2.0]))
    p = posthoc(matrix, lower_is_better=True, test="conover")
    assert np.allclose(p, p.T) and list(p.index) == ["A", "B", "C"]
    assert ((p.to_numpy() >= 0) & (p.to_numpy() <= 1)).all()


# ------------------------------------------------------------------------------ IQM and CI
def test_iqm_is_the_mean_of_the_middle_half():
    assert iqm(np.arange(1.0, 9.0)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm(np.array([1.0, 2.0, 3.0, 100.0])) == pytest.approx(2.5)
    assert iqm(np.array([1.0, 5.0])) == pytest.approx(3.0)  # fewer than 4: nothing cut


def blocks_of(clients: list[np.ndarray], methods: str = "AB") -> Blocks:
    matrix = scores([list(c.mean(axis=0)) for c in clients], methods)
    return Blocks(list(matrix.index.names), matrix, clients)


def test_bootstrap_is_seeded_and_deterministic():
    rng = np.random.default_rng(0)
    clients = [rng.uniform(size=(6, 2)) for _ in range(5)]
    first = stratified_iqm(blocks_of(clients), resamples=500, seed=7)
    again = stratified_iqm(blocks_of(clients), resamples=500, seed=7)
    other = stratified_iqm(blocks_of(clients), resamples=500, seed=8)
    assert first.low.equals(again.low) and first.high.equals(again.high)
    assert not first.low.equals(other.low)
    point = iqm(np.array([c.mean(axis=0) for c in clients]), axis=0)
    assert first.point.to_numpy() == pytest.approx(point)
    assert (first.low <= first.point).all() and (first.point <= first.high).all()


def test_bootstrap_resamples_within_blocks_only():
    # every block's clients agree: a stratified resample reproduces each block exactly (a
    # bootstrap over the pooled clients would mix blocks and give a wide interval)
    clients = [np.full((4, 2), value) for value in (0.1, 0.5, 0.9)]
    result = stratified_iqm(blocks_of(clients), resamples=300, seed=0)
    assert result.low.to_numpy() == pytest.approx([0.5, 0.5])
    assert result.high.to_numpy() == pytest.approx([0.5, 0.5])


def test_bootstrap_interval_of_one_two_client_block_by_hand():
    # one block, clients 0 and 1: a resampled mean is 0, 0.5 or 1 with chance 1/4, 1/2, 1/4,
    # so the 95 % percentile interval is [0, 1]; method B's clients agree: [0.3, 0.3]
    clients = [np.array([[0.0, 0.3], [1.0, 0.3]])]
    result = stratified_iqm(blocks_of(clients), resamples=2000, seed=0)
    assert result.point.to_dict() == pytest.approx({"A": 0.5, "B": 0.3})
    assert (result.low["A"], result.high["A"]) == (0.0, 1.0)
    assert result.low["B"] == pytest.approx(0.3) and result.high["B"] == pytest.approx(0.3)


# ---------------------------------------------------------------------------------- blocks
def collected_rows(drop=(), nan=(), seeds=(0,), axis: str | None = None) -> pd.DataFrame:
    """smoke-like rows: methods a, b, c; malfunctions sfa, ana; k 0..2; 3 clients.
    ``drop``: (method, malfunction, k) cells left out; ``nan``: cells with one NaN client."""
    rows = []
    base = {"a": 0.9, "b": 0.6, "c": 0.3}
    for malfunction in ("sfa", "ana"):
        for k in (0, 1, 2):
            for method, value in base.items():
                for seed in seeds:
                    cell = (method, "none" if k == 0 else malfunction, k)
                    if cell in drop:
                        continue
                    for client in range(3):
                        accuracy = value - 0.1 * k + 0.01 * client
                        if cell in nan and client == 1:
                            accuracy = float("nan")
                        row = {
                            "experiment": "smoke",
                            "malfunction": cell[1],
                            "method_id": method,
                            "k": k,
                            "seed": seed,
                            "client": client,
                            "test_accuracy": accuracy,
                        }
                        if axis is not None:
                            row["axis_lr"] = axis
                        rows.append(row)
    return pd.DataFrame(rows).drop_duplicates(ignore_index=True)


def test_blocks_are_malfunction_k_seed_cells_with_k0_once():
    blocks = make_blocks(collected_rows(), ["a", "b", "c"], "test_accuracy")
    # (none, 0) once, then (ana | sfa) x (1, 2): 5 blocks of 3 clients
    assert len(blocks.scores) == 5 and [c.shape for c in blocks.clients] == [(3, 3)] * 5
    assert blocks.scores.loc[("smoke", "ana", 2, 0)].to_dict() == pytest.approx(
        {"a": 0.71, "b": 0.41, "c": 0.11}
    )
    assert blocks.left_out == [] and blocks.seeds == [0]
    two_seeds = make_blocks(collected_rows(seeds=(0, 1)), ["a", "b", "c"], "test_accuracy")
    assert len(two_seeds.scores) == 10 and two_seeds.seeds == [0, 1]


def test_grid_axis_columns_are_part_of_a_block():
    rows = pd.concat([collected_rows(axis="0.1"), collected_rows(axis="0.01")])
    blocks = make_blocks(rows, ["a", "b", "c"], "test_accuracy")
    assert blocks.keys[-1] == "axis_lr" and len(blocks.scores) == 10


def test_a_missing_or_nan_cell_leaves_its_block_out_and_lists_it():
    rows = collected_rows(drop=[("b", "sfa", 2)], nan=[("c", "ana", 1)])
    blocks = make_blocks(rows, ["a", "b", "c", "ghost"], "test_accuracy")
    assert blocks.methods == ["a", "b", "c"] and len(blocks.scores) == 3
    assert blocks.left_out == [
        "method ghost: no value in any block; left out",
        "ana k=1 seed=0: no value for c; left out",
        "sfa k=2 seed=0: no value for b; left out",
    ]


def test_rank_methods_puts_it_together():
    blocks = make_blocks(collected_rows(), ["c", "a", "b"], "test_accuracy")
    ranking = rank_methods(blocks, lower_is_better=False, resamples=200)
    assert ranking.order == ["a", "b", "c"]
    assert ranking.mean_ranks.to_dict() == {"c": 3.0, "a": 1.0, "b": 2.0}
    # every block ranks a, b, c: chi2 = 12 / (5 * 3 * 4) * (25 + 100 + 225) - 3 * 5 * 4 = 10
    assert ranking.friedman.statistic == pytest.approx(10.0)
    assert ranking.cd == pytest.approx(2.343 * math.sqrt(12 / 30), abs=1e-3)
    assert ranking.p_values.shape == (3, 3)
    two = rank_methods(make_blocks(collected_rows(), ["a", "b"], "test_accuracy"), False)
    assert two.p_values is None and two.cd is None and two.aggregate is not None


def test_diverged_cells_are_listed_per_method():
    rows = collected_rows()
    diverged = (rows["method_id"] == "b") & (rows["malfunction"] == "sfa") & (rows["k"] == 2)
    rows = rows.assign(nonfinite=diverged.astype(int) * 3)
    blocks = make_blocks(rows, ["a", "b", "c"], "test_accuracy")
    assert blocks.diverged == {"b": ["sfa k=2 seed=0"]}
    assert make_blocks(collected_rows(), ["a", "b", "c"], "test_accuracy").diverged == {}
