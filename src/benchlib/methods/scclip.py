"""SCCLIP as the LIGHTYEAR paper cites it: remove-then-clip aggregation (RTC; Yang & Ghaderi,
"Byzantine-Robust Decentralized Learning via Remove-then-Clip Aggregation", AAAI 2024, 38(19):
21735-21743, Algorithm 1), built on self-centred clipping (He, Karimireddy & Jaggi,
"Byzantine-Robust Decentralized Learning via ClippedGossip", arXiv:2202.01545, 2022).

Client i with own model x_i and m received models x_j, uniform gossip weights w = 1/(m + 1):

1. remove: drop the b received models farthest from x_i (b = assumed number of Byzantine peers);
2. clip: project every remaining difference onto the ball of radius tau_i around x_i,
   CLIP(v, tau) = v min(1, tau/||v||), with the clipping radius of ClippedGossip's analysis
   evaluated on the kept set S_i: tau_i^2 = (1/delta_i) sum_{j in S_i} w ||x_j - x_i||^2 with
   delta_i = b w, i.e. tau_i^2 = (1/b) sum_{j in S_i} ||x_j - x_i||^2 (no clipping when b = 0);
3. x_i <- x_i + w sum_{j in S_i} CLIP(x_j - x_i, tau_i) (removed peers count as x_i).

Defaults b = 1, tau = None (the adaptive radius above; a number fixes it). A non-finite model is
infinitely far: it is removed first, and also when more than b of them arrive. The RTC paper's
full text was not available when this was written; steps 1-3 follow its abstract ("filters the
neighbors' values and subsequently projects the remaining values to a sphere centered at its
local value") and ClippedGossip.

``variant: authors`` is the LIGHTYEAR authors' code (executors/p2p_scclipping_executor.py): no
removal; tau_i = the second-largest distance ||x_j - x_i|| (the largest if m = 1); each received
WHOLE model is rescaled to norm <= tau_i; x_i <- mean of x_i and the clipped models. Non-finite
models are left out (the authors' code would crash on them).
"""

from __future__ import annotations

import math

import torch

from benchlib.errors import require
from benchlib.methods.base import P2PMethod, P2PResult, PeerView, register_method
from benchlib.methods.robust_utils import clip_to_radius, distances_to


@register_method
class SCClip(P2PMethod):
    name = "scclip"
    description = "P2P; remove the b farthest peers, clip the rest around the own model"

    def __init__(self, b: int = 1, tau: float | None = None, variant: str = "paper") -> None:
        require(int(b) >= 0, f"scclip: b must be >= 0, got {b}")
        require(tau is None or float(tau) > 0, f"scclip: tau must be > 0, got {tau}")
        require(
            variant == "paper" or (tau is None and int(b) == 1),
            "scclip: variant authors has no removal and a fixed radius rule; remove b and tau",
        )
        self.variant = variant
        self.b = int(b)
        self.tau = None if tau is None else float(tau)

    def radius(self, kept_distances: list[float]) -> float:
        """tau_i: the fixed radius, or sqrt(sum of squared kept distances / b)."""
        if self.tau is not None:
            return self.tau
        if self.b == 0:
            return math.inf
        return math.sqrt(sum(d * d for d in kept_distances) / self.b)

    def aggregate_client(self, view: PeerView) -> P2PResult:
        own, peers, received = view.own, view.peers, view.received
        distances = distances_to(own, received).tolist()
        scores = dict(zip(peers, distances, strict=True))
        finite = [r for r, d in enumerate(distances) if math.isfinite(d)]
        if self.variant == "authors":
            return self._authors(own, peers, received, distances, finite, scores)
        farthest_first = sorted(range(len(peers)), key=lambda r: (-distances[r], r))
        removed = set(farthest_first[: self.b])
        kept = [r for r in finite if r not in removed]
        tau = self.radius([distances[r] for r in kept])
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
