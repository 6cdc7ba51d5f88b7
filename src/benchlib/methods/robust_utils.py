"""Shared helpers of the baseline methods: distances, similarities, clipping, proximal terms.

Geometry is computed in float64 so that enormous (but finite) received models neither overflow
nor lose the small differences between benign ones. A row with a NaN or Inf entry has no
meaningful distance or angle: helpers report it as infinitely far (distances) or as similarity 0,
and every method that is supposed to reject bad models drops such rows before it aggregates.
"""

from __future__ import annotations

import torch

from benchlib.methods.base import proximal_hook
from benchlib.primitives.metrics import finite_rows

__all__ = [
    "clip_to_radius",
    "cosine_matrix",
    "distances_to",
    "finite_rows",
    "pairwise_distances",
    "proximal_hook",
    "weighted_mean",
]


def distances_to(
    reference: torch.Tensor, vectors: torch.Tensor, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """``||v_j - reference||`` for every row (float64); inf for a non-finite row (any entry).

    ``mask`` (bool [d]), if given, limits the distance to its True entries (e.g. the model
    parameters, without BatchNorm statistics: :func:`benchlib.methods.base.parameter_mask`).
    """
    diffs = vectors.double() - reference.double()
    if mask is not None:
        diffs.masked_fill_(~mask.to(diffs.device), 0.0)
    dist = torch.linalg.vector_norm(diffs, dim=1)
    return torch.where(finite_rows(vectors), dist, torch.full_like(dist, float("inf")))


def pairwise_distances(vectors: torch.Tensor) -> torch.Tensor:
    """``[n, n]`` Euclidean distances (float64), each from the exact difference of two rows.

    Entries involving a non-finite row are inf (its diagonal too).
    """
    x = vectors.double()
    rows = [torch.linalg.vector_norm(x - x[i], dim=1) for i in range(len(x))]
    dist = torch.stack(rows) if rows else torch.zeros(0, 0, dtype=torch.float64)
    ok = finite_rows(vectors)
    both = ok[:, None] & ok[None, :]
    return torch.where(both, dist, torch.full_like(dist, float("inf")))


def cosine_matrix(vectors: torch.Tensor) -> torch.Tensor:
    """``[n, n]`` cosine similarities (float64); 0 for a zero or non-finite row."""
    x = vectors.double()
    ok = finite_rows(vectors)
    x = torch.where(ok[:, None], x, torch.zeros_like(x))
    norms = torch.linalg.vector_norm(x, dim=1)
    safe = torch.where(norms > 0, norms, torch.ones_like(norms))
    unit = x / safe[:, None]
    return unit @ unit.T


def weighted_mean(vectors: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``sum_i w_i v_i / sum_i w_i`` in float64."""
    w = weights.double().to(vectors.device)
    return (w[:, None] * vectors.double()).sum(dim=0) / w.sum()


def clip_to_radius(vector: torch.Tensor, radius: float) -> torch.Tensor:
    """``vector * min(1, radius / ||vector||)``: the projection onto the ball of that radius."""
    norm = float(torch.linalg.vector_norm(vector.double()))
    if norm <= radius:
        return vector
    return vector * (radius / norm)
