"""FedAgain (Reyes-Amezcua et al. 2026, Sec. 3.3, Algorithm 2): trust-weighted aggregation.

Per round t every participating client k

1. evaluates the received global model w_t on its own validation split:
   E_k = mean loss of w_t on VD_k (eval mode, no gradient, no BatchNorm update; the task's
   training loss, cross entropy for classification) - the *benchmark error*, sent with the model;
2. trains locally from w_t and sends w_k.

The server computes the divergence D_k = ||w_k - w_t||_2 over the model's parameters only (Eq. 8
measures how far the *parameters* moved): the transmitted vector also holds float buffers such as
BatchNorm running statistics, which are aggregated with the same weights but left out of D_k
(on a ResNet18 they move an order of magnitude more than the weights and would make the trust
track BatchNorm drift). The parameter entries are :func:`~benchlib.methods.base.parameter_mask`
of the training context, taken in the client reports; without one (``aggregate`` called
directly) every entry counts. Then the trust T_k = 1 / (E_k * D_k + eps) with eps = 1e-3
(additive, outside the product, as in the paper's Eq. 9) and the weights
alpha_k = T_k / sum_j T_j (trust only, no sample-count factor: the paper has none), and returns
sum_k alpha_k w_k.

A client whose model or benchmark error is not finite gets trust 0; if no client has positive
trust the global model is kept. Every round's E, D, T and alpha per client go to the method's
state and to metrics.json (``method_summary.trust``), so trust dynamics can be plotted.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from benchlib.methods.base import (
    StarMethod,
    StarRound,
    TrainingContext,
    parameter_mask,
)
from benchlib.methods.robust_utils import distances_to
from benchlib.primitives.errors import require


def trust_weights(
    errors: torch.Tensor, divergences: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, alpha): T_k = 1 / (E_k D_k + eps) (0 where E_k or D_k is not finite), alpha = T/sum T.

    alpha is all zeros when no client has positive trust.
    """
    e, d = errors.double(), divergences.double()
    ok = torch.isfinite(e) & torch.isfinite(d)
    product = torch.where(ok, e * d, torch.zeros_like(e))
    trust = torch.where(ok, 1.0 / (product + eps), torch.zeros_like(e))
    total = trust.sum()
    weights = trust / total if total > 0 else torch.zeros_like(trust)
    return trust, weights


def _plain(values: torch.Tensor) -> list[float | None]:
    return [float(v) if math.isfinite(float(v)) else None for v in values.tolist()]


class FedAgain(StarMethod):
    description = "star; trust-weighted mean, T_k = 1 / (E_k D_k + eps) (benchmark error x L2)"

    def __init__(self, *, eps: float, benchmark_subset: str) -> None:
        self.eps = float(eps)
        self.benchmark_subset = benchmark_subset
        self.trust: list[dict[str, Any]] = []
        # entries of the transmitted vector that enter D_k (None: all of them)
        self.mask: torch.Tensor | None = None

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.trust = []
        self.mask = None

    def client_report(
        self, context: TrainingContext, client: int, round: int
    ) -> dict[str, Any] | None:
        require(context.global_vector is not None, "fedagain needs the round's global model")
        assert context.global_vector is not None
        if self.mask is None:
            self.mask = parameter_mask(context, client)
        error = context.evaluate_loss(client, context.global_vector, self.benchmark_subset)
        return {"benchmark_error": error}

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        require(
            len(info.reports) == len(received)
            and all(r is not None and "benchmark_error" in r for r in info.reports),
            "fedagain: every participant must send its benchmark error",
        )
        errors = torch.tensor(
            [float(r["benchmark_error"]) for r in info.reports],  # type: ignore[index]
            dtype=torch.float64,
        )
        divergences = distances_to(global_vector, received, self.mask).cpu()
        trust, weights = trust_weights(errors, divergences, self.eps)
        self.trust.append(
            {
                "round": int(info.round),
                "clients": [int(c) for c in info.participants],
                "E": _plain(errors),
                "D": _plain(divergences),
                "T": _plain(trust),
                "w": _plain(weights),
            }
        )
        if not bool((weights > 0).any()):
            return global_vector
        keep = weights > 0  # zero-weight rows may be non-finite: leave them out of the sum
        rows = received[keep.to(received.device)].double()
        w = weights[keep].to(rows.device)
        return (w[:, None] * rows).sum(dim=0).to(received.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"trust": [dict(r) for r in self.trust]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.trust = [dict(r) for r in state["trust"]]

    def summary(self) -> dict[str, Any]:
        return {
            "benchmark_subset": self.benchmark_subset,
            "eps": self.eps,
            "trust": self.trust,
        }
