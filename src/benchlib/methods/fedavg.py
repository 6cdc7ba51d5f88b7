"""FedAvg (McMahan et al. 2017): the server averages all client models.

Faithful default: weights proportional to each client's number of training samples. The LIGHTYEAR
authors' code weights by the number of local batches (``weighting: batches``) and P2P FedAvg
(``p2p_fedavg``) is the uniform mean of the own and all received models; its ``variant:
authors`` aggregates the same way but starts every client from its own random model, as the
authors' P2P code does.

``gamma`` < 1 is the LIGHTYEAR paper's ablation (appendix, Figure 13): the server moves toward
the weighted mean m_t by a decaying step, g_{t+1} = g_t + gamma^t (m_t - g_t) (paper Eq. 18 on
the star topology; t counts rounds from 0); gamma = 1 (default) is plain FedAvg.
"""

from __future__ import annotations

import torch

from benchlib.methods.base import (
    P2PMethod,
    P2PResult,
    PeerView,
    StarMethod,
    StarRound,
)


def weighted_mean(vectors: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """sum_i w_i v_i / sum_i w_i over the rows of ``vectors``, as one matrix-vector product (no
    [n, d] temporary: on a CPU its allocation alone costs as much as the arithmetic)."""
    weights = weights.to(vectors.dtype).to(vectors.device)
    return (weights @ vectors) / weights.sum()


class FedAvg(StarMethod):
    description = "star; mean of all client models weighted by training-set size"

    def __init__(self, *, weighting: str, gamma: float) -> None:
        self.weighting = weighting
        self.gamma = float(gamma)

    def client_weights(self, info: StarRound) -> torch.Tensor:
        return {
            "samples": info.train_sizes,
            "batches": info.batch_counts,
            "uniform": torch.ones_like(info.train_sizes),
        }[self.weighting].double()

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        mean = weighted_mean(received, self.client_weights(info)).to(received.dtype)
        if self.gamma == 1.0:
            return mean
        start = global_vector.double()
        return (start + self.gamma**info.round * (mean.double() - start)).to(received.dtype)


class P2PFedAvg(P2PMethod):
    description = "fully connected P2P; uniform mean of own and all received models"

    def __init__(self, *, variant: str) -> None:
        self.variant = variant

    def aggregate_client(self, view: PeerView) -> P2PResult:
        own, peers, received = view.own, view.peers, view.received_stack()
        total = own + received.sum(dim=0)
        return P2PResult(vector=total / (len(peers) + 1), selected=list(peers))
