"""Bulyan (El Mhamdi, Guerraoui, Rouault, "The Hidden Vulnerability of Distributed Learning in
Byzantium", ICML 2018), with Krum as its selection rule.

With n received models of which at most f are Byzantine (n >= 4f + 3 is required):

1. Selection: theta = n - 2f times, run Krum on the models not selected yet and move the one it
   picks into the selection set (Krum score of a model: the sum of its squared Euclidean
   distances to its r - f - 2 nearest other remaining models, r the number remaining; at least
   one neighbour, as in Flower's implementation, so the last picks stay defined);
2. Aggregation, per coordinate: the median m of the theta selected values, then the mean of the
   beta = theta - 2f selected values closest to m (ties: the lower client index first).

Defaults: f = None picks the largest feasible f = floor((n - 3) / 4) (FedAgain does not report
its f; with 10 clients that is f = 1, with 20 clients f = 4). An f with n < 4f + 3 is an error
naming the largest allowed f. The selections of every round go to metrics.json.
"""

from __future__ import annotations

from typing import Any

import torch

from benchlib.methods.base import StarMethod, StarRound
from benchlib.methods.fedmedian import coordinate_median
from benchlib.methods.krum import krum_scores
from benchlib.methods.robust_utils import pairwise_distances
from benchlib.primitives.errors import require


def largest_f(n: int) -> int:
    """The largest f with n >= 4f + 3 (0 when n < 7)."""
    return max((n - 3) // 4, 0)


def bulyan_select(squared: torch.Tensor, f: int, theta: int) -> list[int]:
    """Indices of the ``theta`` models Krum picks one after another (``squared``: [n, n])."""
    remaining = list(range(len(squared)))
    chosen: list[int] = []
    for _ in range(theta):
        sub = squared[remaining][:, remaining]
        r = len(remaining)
        neighbours = min(max(r - f - 2, 1), r - 1)
        scores = krum_scores(sub, neighbours)
        best = min(range(r), key=lambda i: (scores[i].item(), remaining[i]))
        chosen.append(remaining.pop(best))
    return chosen


def trimmed_around_median(selected: torch.Tensor, beta: int) -> torch.Tensor:
    """Per coordinate: the mean of the ``beta`` values of ``selected`` closest to their median."""
    x = selected.double()
    median = coordinate_median(x)
    order = (x - median).abs().argsort(dim=0, stable=True)[:beta]
    return x.gather(0, order).mean(dim=0)


class Bulyan(StarMethod):
    description = "star; Bulyan: n - 2f Krum selections, then a trimmed mean around the median"

    def __init__(self, *, f: int | None) -> None:
        self.f = None if f is None else int(f)
        self.selected: list[list[int]] = []

    def byzantine_bound(self, n: int) -> int:
        f = largest_f(n) if self.f is None else self.f
        require(
            n >= 4 * f + 3,
            f"bulyan needs n >= 4f + 3 models: f = {f} needs at least {4 * f + 3} but {n} "
            f"clients take part; set f <= {largest_f(n)} (or leave f unset)"
            + ("" if n >= 3 else "; Bulyan needs at least 3 clients"),
        )
        return f

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.byzantine_bound(num_clients)
        self.selected = []

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        n = len(received)
        f = self.byzantine_bound(n)
        theta, beta = n - 2 * f, n - 4 * f
        chosen = bulyan_select(pairwise_distances(received) ** 2, f, theta)
        clients = info.participants or list(range(n))
        self.selected.append(sorted(clients[i] for i in chosen))
        return trimmed_around_median(received[chosen], beta).to(received.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"selected": [list(s) for s in self.selected]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.selected = [list(s) for s in state["selected"]]

    def summary(self) -> dict[str, Any]:
        return {"f": self.f, "selected": self.selected}
