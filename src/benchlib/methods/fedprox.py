"""FedProx (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020).

Sec. 3, Algorithm 2: every client approximately minimises the proximal local objective

    h_k(w; w^t) = F_k(w) + mu/2 ||w - w^t||^2

starting from the global model w^t, and the server averages the returned models. Here the local
solver is the configured optimizer for the configured local epochs, the proximal term is added to
every batch loss (its gradient mu (w - w^t) enters every step), and it covers the model's trainable
parameters only: float buffers such as BatchNorm running statistics are transmitted and averaged
but not optimised. With full participation, Algorithm 2's device sampling with probabilities
p_k = n_k / n becomes the mean weighted by training-set size (``weighting`` as in ``fedavg``).

Default mu = 0.01: the paper tunes mu per dataset from {0.001, 0.01, 0.1, 1} and the LIGHTYEAR
paper does not report its value. The LIGHTYEAR authors' code has no FedProx, so there is no
``authors`` variant.
"""

from __future__ import annotations

import torch

from benchlib.methods.base import TrainingContext
from benchlib.methods.fedavg import FedAvg


class FedProx(FedAvg):
    description = "star; FedAvg with the proximal term mu/2 ||w - w_global||^2 in local training"

    def __init__(self, *, mu: float, weighting: str) -> None:
        super().__init__(weighting=weighting, gamma=1.0)
        self.mu = float(mu)

    def proximal_term(
        self, context: TrainingContext, client: int
    ) -> tuple[float, torch.Tensor] | None:
        if self.mu == 0.0 or context.global_vector is None:
            return None
        return self.mu, context.global_vector
