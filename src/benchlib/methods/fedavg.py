"""FedAvg (McMahan et al. 2017): the server averages all client models.

Faithful default: weights proportional to each client's number of training samples. The LIGHTYEAR
authors' code weights by the number of local batches (``weighting: batches``) and P2P FedAvg
(``p2p_fedavg``) is the uniform mean of the own and all received models.
"""

from __future__ import annotations

import torch

from benchlib.errors import require
from benchlib.methods.base import (
    P2PMethod,
    P2PResult,
    PeerView,
    StarMethod,
    StarRound,
    register_method,
)


def weighted_mean(vectors: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_i w_i v_i / sum_i w_i over the rows of ``vectors``."""
    weights = weights.to(vectors.dtype).to(vectors.device)
    return (weights[:, None] * vectors).sum(dim=0) / weights.sum()


@register_method
class FedAvg(StarMethod):
    name = "fedavg"
    description = "star; mean of all client models weighted by training-set size"

    def __init__(self, weighting: str = "samples") -> None:
        require(
            weighting in ("samples", "batches", "uniform"),
            f"fedavg: weighting must be samples, batches or uniform, got {weighting!r}",
        )
        self.weighting = weighting

    def client_weights(self, info: StarRound) -> torch.Tensor:
        return {
            "samples": info.train_sizes,
            "batches": info.batch_counts,
            "uniform": torch.ones_like(info.train_sizes),
        }[self.weighting].double()

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        return weighted_mean(received, self.client_weights(info)).to(received.dtype)


@register_method
class P2PFedAvg(P2PMethod):
    name = "p2p_fedavg"
    description = "fully connected P2P; uniform mean of own and all received models"

    def aggregate_client(self, view: PeerView) -> P2PResult:
        own, peers, received = view.own, view.peers, view.received
        total = own + received.sum(dim=0)
        return P2PResult(vector=total / (len(peers) + 1), selected=list(peers))
