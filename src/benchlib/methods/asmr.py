"""ASMR, Angular Support for Malfunctioning client Resilience (Konstantin, Fuchs & Mukhopadhyay,
MIDL 2024, PMLR 250:754-767), Sec. 2 (Method).

Every received model is scaled to unit length; d_ij = ||u_i - u_j|| (a monotone function of the
angle between the models). The reach density of client i is rd_i = 1 / mean_{j != i} d_ij and its
outlier factor of_i = rd_i / mean_k rd_k. Sorted ascending, the outlier factors are split at the
largest gap between neighbours; the clients below the gap (sparse, far from the rest) are
malfunctioning, the rest are averaged uniformly (mean m_t). If all factors are equal nobody is
removed. A non-finite model is removed before the densities are computed.

The ASMR paper's server applies the kept clients' mean with FedAvgM (Hsu, Qi & Brown 2019) and
server momentum beta = 0.7: v_t = beta v_{t-1} + (g_t - m_t), g_{t+1} = g_t - v_t (v_{-1} = 0,
server learning rate 1; beta = 0 is the plain mean). When every client is removed the global
model and the momentum are kept.

``variant: authors`` is the LIGHTYEAR authors' port (aggregation/ASMR.py): d_ij = 1 - cos(u_i, u_j),
rd_i = 1 / (mean_{j != i} d_ij + 1) and of_i = rd_i / (mean_k rd_k + 1); same gap split and
uniform mean, no momentum.
"""

from __future__ import annotations

from typing import Any

import torch

from benchlib.methods.base import StarMethod, StarRound
from benchlib.methods.robust_utils import cosine_matrix, finite_rows, pairwise_distances


def outlier_factors(vectors: torch.Tensor, variant: str) -> torch.Tensor:
    """ASMR's outlier factor of every row (all rows finite, at least two)."""
    n = len(vectors)
    if variant == "paper":
        x = vectors.double()
        norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        dist = pairwise_distances(x / torch.where(norms > 0, norms, 1.0))
    else:
        dist = 1.0 - cosine_matrix(vectors)
    dist = dist.masked_fill(torch.eye(n, dtype=torch.bool, device=dist.device), 0.0)
    mean_dist = dist.sum(dim=1) / (n - 1)
    if variant == "paper":
        if bool((mean_dist == 0).all()):  # all models point the same way
            return torch.ones(n, dtype=torch.float64)
        density = 1.0 / mean_dist
        return (density / density.mean()).cpu()
    density = 1.0 / (mean_dist + 1.0)
    return (density / (density.mean() + 1.0)).cpu()


def largest_gap_split(factors: list[float]) -> list[int]:
    """Positions (in ``factors``) below the largest gap of the ascending order; [] if no gap."""
    order = sorted(range(len(factors)), key=lambda i: (factors[i], i))
    best_gap, cut = 0.0, 0
    for pos in range(len(order) - 1):
        gap = factors[order[pos + 1]] - factors[order[pos]]
        if gap > best_gap:
            best_gap, cut = gap, pos + 1
    return sorted(order[:cut])


class ASMR(StarMethod):
    description = "star; removes clients below the largest gap of angular outlier factors"

    def __init__(self, *, momentum: float, variant: str) -> None:
        self.variant = variant
        self.beta = float(momentum)
        self.flagged: list[list[int]] = []
        self.momentum: torch.Tensor | None = None

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.flagged = []
        self.momentum = None

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        finite = finite_rows(received).tolist()
        usable = [k for k, ok in enumerate(finite) if ok]
        flagged = [k for k, ok in enumerate(finite) if not ok]
        if len(usable) >= 2:
            factors = outlier_factors(received[usable], self.variant).tolist()
            flagged += [usable[pos] for pos in largest_gap_split(factors)]
        self.flagged.append(sorted(flagged))
        benign = [k for k in usable if k not in flagged]
        if not benign:
            return global_vector
        mean = received[benign].double().mean(dim=0)
        if self.beta == 0:
            return mean.to(received.dtype)
        step = global_vector.double() - mean
        if self.momentum is not None:
            step += self.beta * self.momentum.to(step.device)
        self.momentum = step
        return (global_vector.double() - step).to(received.dtype)

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"flagged": [list(f) for f in self.flagged]}
        if self.momentum is not None:
            state["momentum"] = self.momentum.detach().cpu()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.flagged = [list(f) for f in state["flagged"]]
        self.momentum = state.get("momentum")

    def summary(self) -> dict[str, Any]:
        return {"flagged": self.flagged}
