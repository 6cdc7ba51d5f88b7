"""A new star method in one module: the coordinate-wise median of the received models."""

import torch

from benchlib.methods.base import StarMethod, StarRound


class CoordinateMedian(StarMethod):
    description = "star; coordinate-wise median of the received models"

    def __init__(self, *, trim: int) -> None:
        self.trim = int(trim)  # drop this many largest and smallest values per coordinate

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        ordered = received.sort(dim=0).values
        kept = ordered[self.trim : len(ordered) - self.trim]
        return kept.median(dim=0).values
