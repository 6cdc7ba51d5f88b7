"""Fidelity defects found in review (issue 11), each against numbers worked out by hand.

- SCCLIP's default radius (remove-then-clip, Yang & Ghaderi AAAI 2024, Algorithm 1) must keep a
  client on the honest side when 3 of its 7 peers are Byzantine;
- ASMR's default follows its own paper: FedAvgM with server momentum 0.7 over the kept clients;
- the authors'-code variants of the P2P methods start every client from its own random model,
  every star method and every paper variant from one shared model;
- CFL records the update norms its split test compares with eps1 / eps2.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from fixtures_tasks import groups_split, regression_store, task_cell_spec

from benchlib.fl.engine import CellRun
from benchlib.methods.asmr import ASMR
from benchlib.methods.base import PeerEvaluator, PeerView, StarRound, build_method
from benchlib.methods.cfl import CFL
from benchlib.methods.scclip import SCClip


def no_evaluator() -> PeerEvaluator:
    def fail(_: torch.Tensor) -> torch.Tensor:
        raise AssertionError("this method must not evaluate peers")

    return PeerEvaluator(fail, torch.zeros(1, dtype=torch.long))


def info(round: int, n: int) -> StarRound:
    sizes = torch.full((n,), 10.0, dtype=torch.float64)
    return StarRound(round=round, num_rounds=10, train_sizes=sizes, batch_counts=sizes)


# ------------------------------------------------------------------------------- SCCLIP
HONEST = [[1.0, 0.1], [1.0, -0.1], [1.1, 0.0], [0.9, 0.0]]
MINIMAL = torch.tensor(HONEST + [[-3.0, 0.0]] * 3)


def minimal_view() -> PeerView:
    return PeerView(0, 0, torch.tensor([1.0, 0.0]), list(range(1, 8)), MINIMAL, no_evaluator())


def test_scclip_default_stays_honest_with_three_of_seven_byzantine_peers() -> None:
    method = SCClip()
    method.setup(8, 10, seed=0)
    result = method.aggregate_client(minimal_view())
    # b = 7 // 2 = 3 removes the three copies of (-3, 0); the four honest differences
    # (0, .1), (0, -.1), (.1, 0), (-.1, 0) have norm 0.1 < tau = sqrt(4 * 0.01 / 3) and cancel
    np.testing.assert_allclose(result.vector.numpy(), [1.0, 0.0], atol=1e-7)
    assert result.vector[0] > 0.5
    assert result.selected == [1, 2, 3, 4]


def test_scclip_radius_is_rtc_equation_on_the_kept_set() -> None:
    # b = 1 keeps two attackers: tau^2 = (4 * .01 + 2 * 16) / 1 = 32.04 > 16, nothing clipped:
    # RTC with an assumed Byzantine weight below the real one cannot protect (documented)
    method = SCClip(b=1)
    method.setup(8, 10, seed=0)
    result = method.aggregate_client(minimal_view())
    np.testing.assert_allclose(result.vector.numpy(), [1.0 - 2 * 4.0 / 8, 0.0], atol=1e-6)
    # b = 2 keeps one attacker: tau^2 = (0.04 + 16) / 2 = 8.02; (-4, 0) clipped to sqrt(8.02)
    method = SCClip(b=2)
    method.setup(8, 10, seed=0)
    result = method.aggregate_client(minimal_view())
    np.testing.assert_allclose(result.vector.numpy(), [1.0 - math.sqrt(8.02) / 8, 0.0], atol=1e-6)


def test_scclip_default_b_is_half_the_received_models() -> None:
    method = SCClip()
    assert method.b is None
    assert [method.removals(m) for m in (1, 2, 3, 4, 7)] == [0, 1, 1, 2, 3]
    assert SCClip(b=5).removals(7) == 5


# --------------------------------------------------------------------------------- ASMR
def test_asmr_default_is_fedavgm_with_server_momentum_0_7() -> None:
    g0 = torch.tensor([1.0, 1.0, 1.0])
    # identical directions (scaled copies): no outlier gap, every client kept
    r0 = torch.tensor([[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    r1 = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    asmr = ASMR()
    asmr.setup(2, 10, seed=0)
    g1 = asmr.aggregate(g0, r0, info(0, 2))
    # v1 = 0.7 * 0 + (g0 - mean) = -2; g1 = g0 - v1 = 3
    np.testing.assert_allclose(g1.numpy(), [3.0, 3.0, 3.0])
    g2 = asmr.aggregate(g1, r1, info(1, 2))
    # v2 = 0.7 * (-2) + (3 - 1) = 0.6; g2 = 3 - 0.6 = 2.4
    np.testing.assert_allclose(g2.numpy(), [2.4, 2.4, 2.4], rtol=1e-6)
    restored = ASMR()
    restored.setup(2, 10, seed=0)
    restored.load_state_dict(asmr.state_dict())
    np.testing.assert_allclose(restored.momentum.numpy(), [0.6, 0.6, 0.6], rtol=1e-6)


def test_asmr_authors_variant_keeps_the_uniform_average() -> None:
    asmr = ASMR(variant="authors")
    asmr.setup(2, 10, seed=0)
    g0 = torch.tensor([1.0, 1.0, 1.0])
    r0 = torch.tensor([[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    np.testing.assert_allclose(asmr.aggregate(g0, r0, info(0, 2)).numpy(), [3.0, 3.0, 3.0])
    g1 = asmr.aggregate(g0, r0, info(1, 2))
    np.testing.assert_allclose(g1.numpy(), [3.0, 3.0, 3.0])  # no momentum carried over


# ------------------------------------------------------------------ per-client starts
P2P_AUTHORS = ["p2p_fedavg", "balance", "scclip", "lightyear"]


@pytest.mark.parametrize("method", P2P_AUTHORS)
def test_p2p_authors_variants_start_from_separate_models(method: str) -> None:
    extra = {"tau": 0.6} if method == "lightyear" else {}
    assert build_method(method, {**extra, "variant": "authors"}).model_init == "per_client"
    assert build_method(method, extra).model_init == "shared"


@pytest.mark.parametrize("method", ["krum", "afa", "asmr", "cfl", "ditto"])
def test_star_authors_variants_share_one_start(method: str) -> None:
    assert build_method(method, {"variant": "authors"}).model_init == "shared"


@pytest.fixture(scope="module")
def tab_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tab")
    store = regression_store(root / "store")
    return store, groups_split(store, root / "split.csv")


def distinct_starts(cell: CellRun) -> int:
    return len({tuple(cell.layout.flatten(m).tolist()) for m in cell.models})


def test_engine_follows_the_method_initialisation(tab_data) -> None:
    store, split = tab_data
    spec = task_cell_spec("regression", "p2p_fedavg")
    assert distinct_starts(CellRun(spec, store, split)) == 1
    authors = {**spec, "method_params": {"variant": "authors"}}
    assert distinct_starts(CellRun(authors, store, split)) == 4
    # an explicit model.init in the config wins over the method's choice
    forced = {**authors, "model": {**spec["model"], "init": "shared"}}
    assert distinct_starts(CellRun(forced, store, split)) == 1


# ---------------------------------------------------------------------------------- CFL
def test_cfl_records_the_update_norms_of_its_split_test() -> None:
    cfl = CFL(eps1=0.0, eps2=0.0)
    cfl.setup(3, 10, seed=0)
    g0 = torch.zeros(2)
    received = torch.tensor([[3.0, 4.0], [0.0, 1.0], [0.0, 1.0]])
    cfl.aggregate(g0, received, info(0, 3))
    # weighted mean update (1, 2): norm sqrt(5); largest update norm 5, median 1
    ((mean_norm, max_norm, median_norm),) = cfl.summary()["update_norms"][0]
    assert mean_norm == pytest.approx(math.sqrt(5)) and max_norm == pytest.approx(5.0)
    assert median_norm == pytest.approx(1.0)


@pytest.mark.parametrize(("relative", "splits"), [(False, 0), (True, 1)])
def test_cfl_relative_thresholds_are_in_units_of_the_median_update_norm(relative, splits):
    # two opposite groups: mean update (0, 0.5) has norm 0.5, every client norm is about 10;
    # absolute eps1 = 0.4 never sees a stationary point, relative 0.4 * 10 = 4 does, and the
    # largest norm 10.05 > 1.0 * median
    cfl = CFL(eps1=0.4, eps2=1.0, relative=relative)
    cfl.setup(4, 10, seed=0)
    received = torch.tensor([[10.0, 1.0], [10.0, 0.0], [-10.0, 1.0], [-10.0, 0.0]])
    cfl.aggregate(torch.zeros(2), received, info(0, 4))
    assert len(cfl.summary()["splits"]) == splits
    if splits:
        assert cfl.summary()["splits"][0]["halves"] == [[0, 1], [2, 3]]


# ---------------------------------------------------------------- FedAvg with gamma^t
def test_fedavg_gamma_moves_the_global_model_by_gamma_to_the_t() -> None:
    from benchlib.methods.fedavg import FedAvg

    g = torch.tensor([0.0, 0.0])
    received = torch.tensor([[1.0, 2.0], [3.0, 6.0]])  # equal sizes: mean (2, 4)
    np.testing.assert_allclose(FedAvg(gamma=0.5).aggregate(g, received, info(0, 2)), [2, 4])
    # round 2: g + 0.5^2 * ((2, 4) - g)
    np.testing.assert_allclose(FedAvg(gamma=0.5).aggregate(g, received, info(2, 2)), [0.5, 1])
    np.testing.assert_allclose(FedAvg().aggregate(g, received, info(2, 2)), [2, 4])
