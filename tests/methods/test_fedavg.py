"""FedAvg with the gamma^t-regularised server step (LIGHTYEAR's gamma ablation) by hand."""

from __future__ import annotations

import numpy as np
import torch
from helpers.builders import build_method
from helpers.method_inputs import star_round


def test_fedavg_gamma_moves_the_global_model_by_gamma_to_the_t() -> None:

    g = torch.tensor([0.0, 0.0])
    received = torch.tensor([[1.0, 2.0], [3.0, 6.0]])  # equal sizes: mean (2, 4)
    np.testing.assert_allclose(
        build_method("fedavg", dict(gamma=0.5)).aggregate(g, received, star_round(0, 2)), [2, 4]
    )
    # round 2: g + 0.5^2 * ((2, 4) - g)
    np.testing.assert_allclose(
        build_method("fedavg", dict(gamma=0.5)).aggregate(g, received, star_round(2, 2)), [0.5, 1]
    )
    np.testing.assert_allclose(
        build_method("fedavg", {}).aggregate(g, received, star_round(2, 2)), [2, 4]
    )
