"""SCCLIP as the LIGHTYEAR paper cites it: remove-then-clip aggregation (RTC; Yang & Ghaderi,
"Byzantine-Robust Decentralized Learning via Remove-then-Clip Aggregation", AAAI 2024, 38(19):
21735-21743, Algorithm 1), built on self-centred clipping (He, Karimireddy & Jaggi,
"Byzantine-Robust Decentralized Learning via ClippedGossip", arXiv:2202.01545, 2022).

Client i with own model x_i and m received models x_j, uniform gossip weights w = 1/(m + 1),
and an assumed Byzantine weight delta_max = b w among its peers:

1. remove: drop received models farthest from x_i until the removed weight reaches delta_max,
   i.e. the b farthest;
2. clip: project every remaining difference onto the ball of radius tau_i around x_i,
   CLIP(v, tau) = v min(1, tau/||v||), with RTC's radius over the kept set S_i (own model
   included, distance 0): tau_i^2 = (1/delta_max) sum_{j in S_i} w ||x_j - x_i||^2
   = (1/b) sum_{j in S_i} ||x_j - x_i||^2 (no clipping when b = 0);
3. x_i <- x_i + w sum_{j in S_i} CLIP(x_j - x_i, tau_i) (removed peers count as x_i).

RTC assumes delta_max bounds the real Byzantine weight. With b below the number of attackers
the survivors inflate tau_i (b = 1: tau_i^2 >= every kept squared distance, nothing is ever
clipped), so the default b = None removes b = m // 2 peers: the largest Byzantine minority,
which a client can tolerate without knowing k (LIGHTYEAR's grids run k = 1..n-1 of n clients;
for a Byzantine majority no distance rule can tell sides). An integer b fixes it; tau = None is
the adaptive radius above, a number fixes it. A non-finite model is infinitely far: it is
removed first, and also when more than b of them arrive.

``variant: authors`` is the LIGHTYEAR authors' code (executors/p2p_scclipping_executor.py): no
removal; tau_i = the second-largest distance ||x_j - x_i|| (the largest if m = 1); each received
WHOLE model is rescaled to norm <= tau_i; x_i <- mean of x_i and the clipped models. Non-finite
models are left out (the authors' code would crash on them). Its clients start from separate
random models (``model_init``), as the authors' P2P code does.
"""

from __future__ import annotations

import math

import torch

from benchlib.methods.base import P2PMethod, P2PResult, PeerView
from benchlib.methods.robust_utils import clip_to_radius, distances_to
from benchlib.primitives.errors import require


class SCClip(P2PMethod):
    description = "P2P; remove the b farthest peers, clip the rest around the own model"

    def __init__(self, *, b: int | None, tau: float | None, variant: str) -> None:
        require(
            variant == "paper" or (tau is None and b is None),
            "scclip: variant authors has no removal and a fixed radius rule; remove b and tau",
        )
        self.variant = variant
        self.b = None if b is None else int(b)
        self.tau = None if tau is None else float(tau)

    def removals(self, received: int) -> int:
        """How many of ``received`` peers are removed: b, or m // 2 by default."""
        return received // 2 if self.b is None else self.b

    def radius(self, kept_distances: list[float], removals: int) -> float:
        """tau_i: the fixed radius, or sqrt(sum of squared kept distances / b)."""
        if self.tau is not None:
            return self.tau
        if removals == 0:
            return math.inf
        return math.sqrt(sum(d * d for d in kept_distances) / removals)

    def aggregate_client(self, view: PeerView) -> P2PResult:
        own, peers, received = view.own, view.peers, view.received_stack()
        distances = distances_to(own, received).tolist()
        scores = dict(zip(peers, distances, strict=True))
        finite = [r for r, d in enumerate(distances) if math.isfinite(d)]
        if self.variant == "authors":
            return self._authors(own, peers, received, distances, finite, scores)
        farthest_first = sorted(range(len(peers)), key=lambda r: (-distances[r], r))
        b = self.removals(len(peers))
        removed = set(farthest_first[:b])
        kept = [r for r in finite if r not in removed]
        tau = self.radius([distances[r] for r in kept], b)
        x_i = own.double()
        drift = torch.zeros_like(x_i)
        for r in kept:
            drift += clip_to_radius(received[r].double() - x_i, tau)
        vector = x_i + drift / (len(peers) + 1)
        return P2PResult(
            vector=vector.to(own.dtype), selected=[peers[r] for r in kept], scores=scores
        )

    def _authors(
        self,
        own: torch.Tensor,
        peers: list[int],
        received: torch.Tensor,
        distances: list[float],
        finite: list[int],
        scores: dict[int, float],
    ) -> P2PResult:
        if not finite:
            return P2PResult(vector=own, selected=[], scores=scores)
        ranked = sorted((distances[r] for r in finite), reverse=True)
        tau = ranked[1] if len(ranked) > 1 else ranked[0]
        total = own.double().clone()
        for r in finite:
            total += clip_to_radius(received[r].double(), tau)
        vector = total / (len(finite) + 1)
        return P2PResult(
            vector=vector.to(own.dtype), selected=[peers[r] for r in finite], scores=scores
        )
