"""CFL, Clustered Federated Learning (Sattler, Mueller & Samek, "Clustered Federated Learning:
Model-Agnostic Distributed Multitask Optimization Under Privacy Constraints", IEEE TNNLS 2021).

Algorithm 3 (CFL), per round: every client trains from its cluster's model theta_c and returns the
update dtheta_i = theta_i - theta_c. For each cluster c, with data-size weights |D_i| / |D_c|:

- if ||sum_i |D_i|/|D_c| dtheta_i|| < eps1 (the cluster's federation is near a stationary point)
  and max_i ||dtheta_i|| > eps2 (some client is still far from its own optimum), c is split by
  the optimal bi-partition of the cosine similarities alpha_ij = cos(dtheta_i, dtheta_j)
  (Algorithm 1: merge the most similar pairs until two groups remain, which minimises the largest
  cross-group similarity); both halves start from theta_c;
- every (new) cluster's model moves by its members' weighted mean update.

The thresholds are norms of model updates, so they depend on model, optimiser, learning rate and
the number of local steps; ``relative: true`` reads eps1 and eps2 in units of the cluster's
median client-update norm of the round (scale-free; see docs/papers/lightyear.md for the
calibration on FEMNIST with Adam). The norms of every round are recorded in metrics.json
(``update_norms``: per cluster [||mean update||, max client norm, median client norm]).

Clusters and their models persist across rounds; each client trains from and is evaluated on its
cluster's model. Defaults eps1 = 0.4, eps2 = 1.6 are those of the CFL authors' demo code; both
are norms of model updates and depend on model and learning rate. A non-finite model takes no
part in its round (its cluster ignores it); when its cluster splits it joins the larger half.
The engine's single global vector is the model of the largest cluster.

``variant: authors`` is the LIGHTYEAR authors' code (aggregation/CFL.py): every round, the matrix
of pairwise cosine distances of the raw models (NaN -> -1, +-inf -> +-1) is clustered, its rows
taken as Euclidean feature vectors, by complete-linkage agglomerative clustering into two groups
(labelled as scikit-learn does); the group labelled 1 is benign if it holds more than n // 2
clients, otherwise the group labelled 0; the new single global model is the uniform mean of the
benign group (its non-finite models excluded).
"""

from __future__ import annotations

from typing import Any

import torch

from benchlib.methods.base import StarMethod, StarRound, TrainingContext
from benchlib.methods.robust_utils import (
    cosine_matrix,
    finite_rows,
    pairwise_distances,
    weighted_mean,
)


def optimal_bipartition(similarity: torch.Tensor) -> tuple[list[int], list[int]]:
    """Sattler et al.'s Algorithm 1 on an ``[m, m]`` similarity matrix (m >= 2).

    Joins pairs in order of decreasing similarity until two groups remain; returns them ordered
    by their smallest member.
    """
    m = len(similarity)
    root = list(range(m))

    def find(i: int) -> int:
        while root[i] != i:
            i = root[i]
        return i

    pairs = sorted(
        ((similarity[i, j].item(), i, j) for i in range(m) for j in range(i + 1, m)),
        key=lambda p: (-p[0], p[1], p[2]),
    )
    groups = m
    for _, i, j in pairs:
        if groups == 2:
            break
        a, b = find(i), find(j)
        if a != b:
            root[max(a, b)] = min(a, b)
            groups -= 1
    members: dict[int, list[int]] = {}
    for i in range(m):
        members.setdefault(find(i), []).append(i)
    first, second = sorted(members.values())
    return first, second


def complete_linkage_halves(features: torch.Tensor) -> tuple[list[int], list[int]]:
    """Complete-linkage (Euclidean) agglomerative clustering of the rows into two clusters.

    Returns (label 1, label 0) as scikit-learn numbers them: the root's children in the merge
    tree, label 0 being the child with the larger node id (leaves 0..n-1, merges n, n+1, ...).
    """
    dist = pairwise_distances(features)
    clusters: dict[int, list[int]] = {i: [i] for i in range(len(features))}
    next_id = len(features)
    while len(clusters) > 2:
        ids = sorted(clusters)
        best: tuple[float, int, int] | None = None
        for pos, a in enumerate(ids):
            for b in ids[pos + 1 :]:
                d = dist[clusters[a]][:, clusters[b]].max().item()
                if best is None or d < best[0]:
                    best = (d, a, b)
        assert best is not None
        _, a, b = best
        clusters[next_id] = clusters.pop(a) + clusters.pop(b)
        next_id += 1
    low, high = sorted(clusters)
    return sorted(clusters[low]), sorted(clusters[high])


def cosine_distance_features(vectors: torch.Tensor) -> torch.Tensor:
    """1 - cos of the raw rows; -1 wherever the cosine is undefined (non-finite or zero rows)."""
    x = vectors.double()
    ok = finite_rows(vectors) & (torch.linalg.vector_norm(torch.nan_to_num(x), dim=1) > 0)
    both = ok[:, None] & ok[None, :]
    return torch.where(both, 1.0 - cosine_matrix(vectors), -1.0)


class CFL(StarMethod):
    description = "star; clustered FL: cosine bi-partitioning of updates, one model per cluster"

    def __init__(self, *, eps1: float, eps2: float, relative: bool, variant: str) -> None:
        self.variant = variant
        self.eps1, self.eps2 = float(eps1), float(eps2)
        self.relative = bool(relative)

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.clusters: list[list[int]] = [list(range(num_clients))]
        self.models: list[torch.Tensor] = []
        self.history: list[Any] = []  # paper: clusters per round; authors: benign group per round
        self.splits: list[dict[str, Any]] = []
        # per round, per cluster: norm of the mean update, largest and median client update norm
        self.norms: list[list[list[float]]] = []

    # ------------------------------------------------------------------ cluster models
    def _cluster_of(self, client: int) -> int:
        return next(c for c, members in enumerate(self.clusters) if client in members)

    def _ensure_models(self, vector: torch.Tensor) -> None:
        if not self.models:
            self.models = [vector.detach().clone()]

    def before_training(self, context: TrainingContext, client: int, round: int) -> None:
        if self.variant == "paper" and context.global_vector is not None:
            self._ensure_models(context.global_vector)
            model = self.models[self._cluster_of(client)]
            context.layout.load(context.models[client], model)

    def evaluation_vector(self, client: int, global_vector: torch.Tensor) -> torch.Tensor:
        if self.variant == "paper" and self.models:
            return self.models[self._cluster_of(client)]
        return global_vector

    # --------------------------------------------------------------------- aggregation
    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        if self.variant == "authors":
            return self._majority_filter(global_vector, received)
        self._ensure_models(global_vector)
        self.models = [m.to(received.device) for m in self.models]
        sizes = info.train_sizes.double()
        finite = finite_rows(received).tolist()
        clusters: list[list[int]] = []
        models: list[torch.Tensor] = []
        norms: list[list[float]] = []
        for index, (members, model) in enumerate(zip(self.clusters, self.models, strict=True)):
            present = [k for k in members if finite[k]]
            if not present:
                clusters.append(members)
                models.append(model)
                continue
            updates = received[present].double() - model.double()
            mean_update = weighted_mean(updates, sizes[present])
            client_norms = torch.linalg.vector_norm(updates, dim=1)
            max_norm = client_norms.max().item()
            median_norm = client_norms.median().item()
            mean_norm = torch.linalg.vector_norm(mean_update).item()
            norms.append([mean_norm, max_norm, median_norm])
            unit = median_norm if self.relative else 1.0
            stationary = mean_norm < self.eps1 * unit
            if len(present) >= 2 and stationary and max_norm > self.eps2 * unit:
                halves = self._split(info.round, index, present, updates, members, finite)
                for half in halves:
                    rows = [present.index(k) for k in half if finite[k]]
                    step = weighted_mean(updates[rows], sizes[[present[r] for r in rows]])
                    clusters.append(half)
                    models.append((model.double() + step).to(model.dtype))
            else:
                clusters.append(members)
                models.append((model.double() + mean_update).to(model.dtype))
        self.clusters, self.models = clusters, models
        self.norms.append(norms)
        self.history.append([list(c) for c in clusters])
        largest = max(range(len(clusters)), key=lambda c: (len(clusters[c]), -min(clusters[c])))
        return self.models[largest]

    def _split(
        self,
        round_index: int,
        cluster: int,
        present: list[int],
        updates: torch.Tensor,
        members: list[int],
        finite: list[bool],
    ) -> list[list[int]]:
        similarity = cosine_matrix(updates)
        first, second = optimal_bipartition(similarity)
        cross = similarity[first][:, second].max().item()
        halves = [[present[i] for i in first], [present[i] for i in second]]
        absent = [k for k in members if not finite[k]]
        larger = 0 if len(halves[0]) >= len(halves[1]) else 1
        halves[larger] = sorted(halves[larger] + absent)
        self.splits.append(
            {
                "round": round_index,
                "cluster": [int(k) for k in members],
                "halves": halves,
                "max_cross_similarity": cross,
            }
        )
        return halves

    def _majority_filter(self, global_vector: torch.Tensor, received: torch.Tensor) -> torch.Tensor:
        n = len(received)
        finite = finite_rows(received).tolist()
        if n >= 2:
            label1, label0 = complete_linkage_halves(cosine_distance_features(received))
            benign = label1 if len(label1) > n // 2 else label0
        else:
            benign = list(range(n))
        self.history.append(sorted(benign))
        usable = [k for k in benign if finite[k]]
        if not usable:
            return global_vector
        return received[usable].double().mean(dim=0).to(received.dtype)

    # ----------------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "clusters": [list(c) for c in self.clusters],
            "models": [m.detach().cpu() for m in self.models],
            "history": self.history,
            "splits": self.splits,
            "norms": self.norms,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.clusters = [list(c) for c in state["clusters"]]
        self.models = list(state["models"])
        self.history = list(state["history"])
        self.splits = list(state["splits"])
        self.norms = list(state.get("norms", []))

    def summary(self) -> dict[str, Any]:
        if self.variant == "authors":
            return {"benign": self.history}
        return {"clusters": self.history, "splits": self.splits, "update_norms": self.norms}
