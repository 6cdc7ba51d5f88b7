"""AFA, Adaptive Federated Averaging (Munoz-Gonzalez, Co & Lupu, "Byzantine-Robust Federated
Machine Learning through Adaptive Model Averaging", arXiv:1909.05125, 2019).

Sec. 3, Algorithm 1 (robust aggregation), per round over the clients not blocked:

1. G = all of them; xi = xi0.
2. M = sum_{k in G} p_k n_k M_k / sum_{k in G} p_k n_k; s_k = cos(M, M_k) for k in G.
3. mean, median and (population) std of the s_k. If mean < median, the clients with
   s_k < median - xi std are bad, otherwise those with s_k > median + xi std.
4. Remove the bad ones from G, xi += delta_xi, repeat from 2 until none is found.
5. The new global model is M over the final G.

Sec. 3 (Bayesian reputation): each client has a Beta(alpha_k, beta_k) posterior of being good,
prior (alpha0, beta0) = (3, 3); p_k = alpha_k / (alpha_k + beta_k); after the round good clients
get alpha_k += 1, bad ones beta_k += 1, and a client is blocked for the rest of the run once
P(p_k < 0.5) = I_0.5(alpha_k, beta_k) >= delta = 0.95. Defaults xi0 = 2, delta_xi = 0.5;
n_k = training-set size. A non-finite model is bad in its round before the loop starts.

``variant: authors`` is the LIGHTYEAR authors' port (aggregation/AFA.py): delta_xi = 0.25,
n_k = number of local batches, and the aggregator is rebuilt every round, so the reputation
never persists (every p_k equal) and nobody is ever blocked.
"""

from __future__ import annotations

import statistics
from typing import Any

import torch
from scipy.special import betainc

from benchlib.methods.base import StarMethod, StarRound
from benchlib.methods.robust_utils import finite_rows, weighted_mean


def outlier_rounds(
    vectors: torch.Tensor, weights: torch.Tensor, candidates: list[int], xi0: float, delta_xi: float
) -> tuple[list[int], list[int]]:
    """Algorithm 1's loop: (good, bad) client indices among ``candidates``."""
    good = list(candidates)
    bad: list[int] = []
    xi = xi0
    while good:
        merged = weighted_mean(vectors[good], weights[good])
        rows = vectors[good].double()
        norms = torch.linalg.vector_norm(rows, dim=1) * torch.linalg.vector_norm(merged)
        dots = rows @ merged
        sims = torch.where(norms > 0, dots / torch.where(norms > 0, norms, 1.0), 0.0).tolist()
        mean, median = statistics.fmean(sims), statistics.median(sims)
        std = statistics.pstdev(sims)
        if mean < median:
            new_bad = [k for k, s in zip(good, sims, strict=True) if s < median - xi * std]
        else:
            new_bad = [k for k, s in zip(good, sims, strict=True) if s > median + xi * std]
        if not new_bad:
            break
        good = [k for k in good if k not in new_bad]
        bad.extend(new_bad)
        xi += delta_xi
    return good, sorted(bad)


def prob_bad(alpha: float, beta: float) -> float:
    """P(p < 0.5) for p ~ Beta(alpha, beta): the regularised incomplete beta I_0.5(alpha, beta)."""
    return float(betainc(alpha, beta, 0.5))


class AFA(StarMethod):
    description = "star; adaptive federated averaging: cosine outlier rounds + Beta reputation"

    def __init__(
        self,
        *,
        xi0: float,
        delta_xi: float,
        alpha0: float,
        beta0: float,
        block_threshold: float,
        variant: str,
    ) -> None:
        self.variant = variant
        self.xi0 = float(xi0)
        self.delta_xi = float(delta_xi)
        self.alpha0, self.beta0 = float(alpha0), float(beta0)
        self.block_threshold = float(block_threshold)

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.alpha = [self.alpha0] * num_clients
        self.beta = [self.beta0] * num_clients
        self.blocked: list[int] = []
        self.flagged: list[list[int]] = []

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        n = len(received)
        sizes = info.train_sizes if self.variant == "paper" else info.batch_counts
        if self.variant == "paper":
            reputation = torch.tensor(
                [a / (a + b) for a, b in zip(self.alpha, self.beta, strict=True)]
            )
        else:
            reputation = torch.ones(n, dtype=torch.float64)
        weights = reputation.double() * sizes.double()
        finite = finite_rows(received).tolist()
        active = [k for k in range(n) if k not in self.blocked]
        candidates = [k for k in active if finite[k]]
        good, bad = outlier_rounds(received, weights, candidates, self.xi0, self.delta_xi)
        bad = sorted(bad + [k for k in active if not finite[k]])
        self.flagged.append(bad)
        if self.variant == "paper":
            self._update_reputation(good, bad)
        if not good:
            return global_vector
        return weighted_mean(received[good], weights[good]).to(received.dtype)

    def _update_reputation(self, good: list[int], bad: list[int]) -> None:
        for k in good:
            self.alpha[k] += 1.0
        for k in bad:
            self.beta[k] += 1.0
        for k in good + bad:
            if prob_bad(self.alpha[k], self.beta[k]) >= self.block_threshold:
                self.blocked.append(k)
        self.blocked.sort()

    def state_dict(self) -> dict[str, Any]:
        return {
            "alpha": list(self.alpha),
            "beta": list(self.beta),
            "blocked": list(self.blocked),
            "flagged": [list(f) for f in self.flagged],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.alpha = [float(a) for a in state["alpha"]]
        self.beta = [float(b) for b in state["beta"]]
        self.blocked = [int(k) for k in state["blocked"]]
        self.flagged = [list(f) for f in state["flagged"]]

    def summary(self) -> dict[str, Any]:
        if self.variant == "authors":
            return {"flagged": self.flagged}
        return {
            "flagged": self.flagged,
            "blocked": self.blocked,
            "alpha": self.alpha,
            "beta": self.beta,
        }
