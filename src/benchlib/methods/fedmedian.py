"""FedMedian (Yin et al., "Byzantine-Robust Distributed Learning: Towards Optimal Statistical
Rates", ICML 2018): the coordinate-wise median of the received models, unweighted.

With an even number of models the median of a coordinate is the mean of its two middle values
(as ``numpy.median`` and Flower's FedMedian compute it), not torch's lower middle value. Computed
in float64; non-finite entries sort last (NaN after +inf), so a minority of broken models cannot
move the median past the finite values.
"""

from __future__ import annotations

import torch

from benchlib.methods.base import StarMethod, StarRound


def coordinate_median(vectors: torch.Tensor) -> torch.Tensor:
    """Per-coordinate median of the rows (mean of the two middle values for an even count)."""
    n = len(vectors)
    ordered = vectors.double().sort(dim=0).values
    if n % 2 == 1:
        return ordered[n // 2]
    return (ordered[n // 2 - 1] + ordered[n // 2]) / 2


class FedMedian(StarMethod):
    description = "star; coordinate-wise median of the received models (unweighted)"

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        return coordinate_median(received).to(received.dtype)
