"""Malfunctions on transmitted copies, client placement, and FedAvg arithmetic."""

from __future__ import annotations

import pytest
import torch
from helpers.builders import build_method

from benchlib.fl.malfunctions import MalfunctionContext, get_malfunction, malicious_clients
from benchlib.fl.rng import torch_generator
from benchlib.methods.base import PeerView, StarRound
from benchlib.primitives.errors import BenchlibError


def context(round_index=3, client=2, scale=120.5):
    return MalfunctionContext(
        seed=7,
        round=round_index,
        client=client,
        fresh_vector=lambda seed: torch.full((4,), float(seed % 1000)),
        params={"ana": {"scale": scale}, "start_round": 0},
    )


def test_ana_is_multiplicative_gaussian_noise_from_the_keyed_stream():
    w = torch.tensor([1.0, -2.0, 0.5, 0.0])
    noisy, kind = get_malfunction("ana")(w, context())
    eps = torch.randn(4, generator=torch_generator(7, "malfunction/ana", 3, 2))
    torch.testing.assert_close(noisy, w * (1 + 1.205 * eps))
    assert kind == "ana"
    assert noisy[3] == 0.0  # multiplicative: zero weights stay zero


def test_sfa_flips_signs_and_leaves_the_original_alone():
    w = torch.tensor([1.0, -2.0, 0.5])
    flipped, _ = get_malfunction("sfa")(w, context())
    assert torch.equal(flipped, -w) and torch.equal(w, torch.tensor([1.0, -2.0, 0.5]))


def test_random_is_a_fresh_initialisation_per_round_and_client():
    a, _ = get_malfunction("random")(torch.zeros(4), context(round_index=1))
    b, _ = get_malfunction("random")(torch.zeros(4), context(round_index=2))
    again, _ = get_malfunction("random")(torch.zeros(4), context(round_index=1))
    assert not torch.equal(a, b) and torch.equal(a, again)


def test_dynamic_draws_each_basic_malfunction_over_rounds():
    kinds = {
        get_malfunction("dynamic")(torch.ones(4), context(round_index=r))[1] for r in range(30)
    }
    assert kinds == {"ana", "sfa", "random"}


def test_malicious_placement():
    assert malicious_clients(8, 3, "first", 0) == [0, 1, 2]
    assert malicious_clients(8, 3, "last", 0) == [5, 6, 7]
    chosen = malicious_clients(8, 3, "random", 0)
    assert len(set(chosen)) == 3 and chosen == malicious_clients(8, 3, "random", 0)
    with pytest.raises(BenchlibError, match=r"must be in 0\.\.7"):
        malicious_clients(8, 8, "first", 0)


def test_fedavg_weights_by_samples_or_batches():
    received = torch.tensor([[1.0, 0.0], [3.0, 2.0], [0.0, 6.0]])
    info = StarRound(0, 1, torch.tensor([10.0, 30.0, 60.0]), torch.tensor([1.0, 1.0, 2.0]))
    by_samples = build_method("fedavg", {}).aggregate(torch.zeros(2), received, info)
    torch.testing.assert_close(by_samples, torch.tensor([(10 + 90) / 100, (60 + 360) / 100]))
    by_batches = build_method("fedavg", {"weighting": "batches"}).aggregate(
        torch.zeros(2), received, info
    )
    torch.testing.assert_close(by_batches, torch.tensor([4 / 4, 14 / 4]))


def test_p2p_fedavg_is_the_uniform_mean_with_the_own_model():
    method = build_method("p2p_fedavg", {})
    result = method.aggregate_client(
        PeerView(0, 0, torch.tensor([3.0]), [1, 2], torch.tensor([[0.0], [6.0]]), None)
    )
    assert result.vector.item() == pytest.approx(3.0) and result.selected == [1, 2]
