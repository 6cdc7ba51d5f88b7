"""Krum and Multi-Krum (Blanchard et al., "Machine Learning with Adversaries: Byzantine Tolerant
Gradient Descent", NeurIPS 2017).

Sec. 4: with n received vectors of which at most f are Byzantine, the score of vector i is

    s(i) = sum_{j in N_i} ||V_i - V_j||^2,

N_i being the n - f - 2 vectors closest to V_i; Krum outputs the vector with the lowest score.
Multi-Krum (Sec. 5) outputs the mean of the m vectors with the lowest scores (m = 1 is Krum).
Models instead of gradients change nothing: every client starts from the same global model, so
distances between models equal distances between updates, and so do their means.

Defaults: f = None picks the largest f with 2f + 2 < n (the paper's resilience condition), m = 1.
Any f with n - f - 2 >= 1 is accepted. A non-finite vector is infinitely far from every other, so
it is never chosen; if no vector has a finite score the global model is kept.

``variant: authors`` is the LIGHTYEAR authors' code (aggregation/Krum.py): f = n // 2,
n - f - 2 neighbours (none when n = 4, then every score is 0 and the first client wins), plain
(not squared) Euclidean distances, a single chosen model (m = 1).
"""

from __future__ import annotations

from typing import Any

import torch

from benchlib.methods.base import StarMethod, StarRound
from benchlib.methods.robust_utils import pairwise_distances
from benchlib.primitives.errors import require


def krum_scores(distances: torch.Tensor, neighbours: int) -> torch.Tensor:
    """Sum of each row's ``neighbours`` smallest off-diagonal entries of ``distances``."""
    n = len(distances)
    off_diagonal = distances.masked_fill(
        torch.eye(n, dtype=torch.bool, device=distances.device), float("inf")
    )
    if neighbours == 0:
        scores = torch.zeros(n, dtype=distances.dtype, device=distances.device)
    else:
        scores = off_diagonal.sort(dim=1).values[:, :neighbours].sum(dim=1)
    # a non-finite row has an infinite diagonal: never selectable
    return torch.where(torch.isfinite(distances.diagonal()), scores, float("inf"))


class Krum(StarMethod):
    description = "star; (Multi-)Krum: mean of the m models with the lowest Krum scores"

    def __init__(self, *, f: int | None, m: int, variant: str) -> None:
        require(
            variant == "paper" or (f is None and int(m) == 1),
            "krum: variant authors fixes f = n // 2 and m = 1; remove f and m",
        )
        self.variant = variant
        self.f = None if f is None else int(f)
        self.m = int(m)
        self.selected: list[list[int]] = []

    def byzantine_bound(self, n: int) -> int:
        if self.variant == "authors":
            return n // 2
        return max((n - 3) // 2, 0) if self.f is None else self.f

    def neighbours(self, n: int) -> int:
        return max(n - self.byzantine_bound(n) - 2, 0)

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        if self.variant == "paper":
            require(
                self.neighbours(num_clients) >= 1,
                f"krum: n - f - 2 must be >= 1; with {num_clients} clients use f <= "
                f"{num_clients - 3}",
            )
            require(self.m <= num_clients, f"krum: m must be <= {num_clients}, got {self.m}")
        self.selected = []

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        n = len(received)
        distances = pairwise_distances(received)
        if self.variant == "paper":
            distances = distances**2
        scores = krum_scores(distances, self.neighbours(n))
        order = sorted(range(n), key=lambda i: (scores[i].item(), i))
        chosen = [i for i in order[: self.m] if torch.isfinite(scores[i])]
        self.selected.append(sorted(chosen))
        if not chosen:
            return global_vector
        return received[chosen].double().mean(dim=0).to(received.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"selected": [list(s) for s in self.selected]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.selected = [list(s) for s in state["selected"]]

    def summary(self) -> dict[str, Any]:
        return {"selected": self.selected}
