"""BALANCE (Fang et al., "Byzantine-Robust Decentralized Federated Learning", ACM CCS 2024),
Sec. 4 (Algorithm 1).

Client i compares every received model theta_j with its own model theta_i (here: right after
this round's local training) and accepts it iff

    ||theta_i - theta_j|| <= gamma * exp(-kappa * lambda(t)) * ||theta_i||,   lambda(t) = t / T

(t = 0..T-1 the round, T the number of rounds), then mixes

    theta_i <- alpha * theta_i + (1 - alpha) * (1/|S_i|) sum_{j in S_i} theta_j,

keeping its own model when S_i is empty. Defaults gamma = 0.3, kappa = 1, alpha = 0.5. A
non-finite model is never accepted (its distance is infinite). The reported score of peer j is
the relative distance ||theta_i - theta_j|| / ||theta_i||.

``variant: authors`` is the LIGHTYEAR authors' code (executors/p2p_balance_executor.py):
lambda = (t + 1) / T and theta_i <- alpha theta_i + (1 - alpha)/(|S_i| + 1) sum_{j in S_i} theta_j,
whose weights do not sum to one and which halves the model (alpha = 0.5) when S_i is empty.
"""

from __future__ import annotations

import math

import torch

from benchlib.methods.base import P2PMethod, P2PResult, PeerView
from benchlib.methods.robust_utils import distances_to


class Balance(P2PMethod):
    description = "P2P; accept peers within a shrinking distance of the own model, then mix"

    def __init__(self, *, gamma: float, kappa: float, alpha: float, variant: str) -> None:
        self.variant = variant
        self.gamma, self.kappa, self.alpha = float(gamma), float(kappa), float(alpha)

    def threshold_factor(self, round: int) -> float:
        """gamma * exp(-kappa * lambda(t)), the accepted distance relative to ||theta_i||."""
        t = round if self.variant == "paper" else round + 1
        return self.gamma * math.exp(-self.kappa * t / self.num_rounds)

    def aggregate_client(self, view: PeerView) -> P2PResult:
        round, own, peers = view.round, view.own, view.peers
        received = view.received_stack()
        own_norm = float(torch.linalg.vector_norm(own.double()))
        distances = distances_to(own, received).tolist()
        limit = self.threshold_factor(round) * own_norm
        rows = [r for r, d in enumerate(distances) if d <= limit]
        scores = {
            p: d / own_norm if own_norm > 0 else math.inf
            for p, d in zip(peers, distances, strict=True)
        }
        selected = [peers[r] for r in rows]
        accepted_sum = received[rows].double().sum(dim=0)
        if self.variant == "paper":
            if not rows:
                return P2PResult(vector=own, selected=[], scores=scores)
            mixed = self.alpha * own.double() + (1 - self.alpha) * accepted_sum / len(rows)
        else:
            mixed = self.alpha * own.double() + (1 - self.alpha) * accepted_sum / (len(rows) + 1)
        return P2PResult(vector=mixed.to(own.dtype), selected=selected, scores=scores)
