"""ASMR follows its own paper by default: FedAvgM with server momentum 0.7 over the kept clients;
the authors' variant keeps the uniform average. Values worked out by hand."""

from __future__ import annotations

import numpy as np
import torch
from helpers.builders import build_method
from helpers.method_inputs import star_round


def test_asmr_default_is_fedavgm_with_server_momentum_0_7() -> None:
    g0 = torch.tensor([1.0, 1.0, 1.0])
    # identical directions (scaled copies): no outlier gap, every client kept
    r0 = torch.tensor([[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    r1 = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    asmr = build_method("asmr", {})
    asmr.setup(2, 10, seed=0)
    g1 = asmr.aggregate(g0, r0, star_round(0, 2))
    # v1 = 0.7 * 0 + (g0 - mean) = -2; g1 = g0 - v1 = 3
    np.testing.assert_allclose(g1.numpy(), [3.0, 3.0, 3.0])
    g2 = asmr.aggregate(g1, r1, star_round(1, 2))
    # v2 = 0.7 * (-2) + (3 - 1) = 0.6; g2 = 3 - 0.6 = 2.4
    np.testing.assert_allclose(g2.numpy(), [2.4, 2.4, 2.4], rtol=1e-6)
    restored = build_method("asmr", {})
    restored.setup(2, 10, seed=0)
    restored.load_state_dict(asmr.state_dict())
    np.testing.assert_allclose(restored.momentum.numpy(), [0.6, 0.6, 0.6], rtol=1e-6)


def test_asmr_authors_variant_keeps_the_uniform_average() -> None:
    asmr = build_method("asmr", dict(variant="authors"))
    asmr.setup(2, 10, seed=0)
    g0 = torch.tensor([1.0, 1.0, 1.0])
    r0 = torch.tensor([[2.0, 2.0, 2.0], [4.0, 4.0, 4.0]])
    np.testing.assert_allclose(asmr.aggregate(g0, r0, star_round(0, 2)).numpy(), [3.0, 3.0, 3.0])
    g1 = asmr.aggregate(g0, r0, star_round(1, 2))
    np.testing.assert_allclose(g1.numpy(), [3.0, 3.0, 3.0])  # no momentum carried over
