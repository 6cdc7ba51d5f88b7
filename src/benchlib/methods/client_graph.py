"""Client-topology helpers shared by TFL and DRFA: similarity graphs, centrality priors and the
projected (KL-regularised) ascent on the client weights lambda.

Choices the TFL paper leaves open (docs/papers/tfl.md): similarities are min-max normalised over the
off-diagonal entries to [0, 1] before the epsilon threshold (raw dot products of model weights
are not on a 0-1 scale; Figure 4 of the paper normalises scores to [0, 1] the same way); distances
(l1, l2) become similarities by negation before that normalisation; the epsilon-graph is
unweighted for centrality (networkx defaults). Betweenness is the paper's (Sec. 3.2)
c_k = sum over pairs s != k != t of sigma_st(k) / sigma_st, each unordered pair counted once
(networkx ``normalized=False``). Every centrality is on one footing, chosen by one switch
(``normalized_betweenness``, the TFL parameter): normalised, every centrality is networkx's
normalised form (within [0, 1]: betweenness and current-flow betweenness divided by
(n-1)(n-2)/2, degree by n-1, closeness, the unit-norm eigenvector, PageRank); raw (the default),
every centrality is on the pair scale of the paper's betweenness: its normalised form times
(n-1)(n-2)/2, which is exactly the paper's unnormalised betweenness. So the softmax prior's
sharpness follows the centrality's shape, not its scale. Eigenvector and current-flow
centrality are defined on connected graphs: they are computed per connected component.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from benchlib.errors import require

LOG = logging.getLogger("benchlib")
SIMILARITIES = ("dot", "cosine", "l2", "l1")
CENTRALITIES = ("betweenness", "degree", "closeness", "eigenvector", "pagerank", "current_flow")


def similarity_matrix(vectors: torch.Tensor, metric: str = "dot") -> np.ndarray:
    """Pairwise similarity of the rows of ``vectors`` ([K, d]) as a float64 [K, K] array."""
    require(metric in SIMILARITIES, f"unknown similarity {metric!r}; choose from {SIMILARITIES}")
    v = vectors.double()
    if metric == "dot":
        s = v @ v.T
    elif metric == "cosine":
        unit = v / v.norm(dim=1, keepdim=True).clamp_min(1e-12)
        s = unit @ unit.T
    else:
        s = -torch.cdist(v, v, p=2.0 if metric == "l2" else 1.0)
    return s.cpu().numpy()


def normalise(similarity: np.ndarray) -> np.ndarray:
    """Min-max scaling of the off-diagonal entries to [0, 1] (diagonal set to 0).

    Non-finite similarities (a diverged model's NaN or inf) are an error: min and max would be
    NaN and every pair would silently become 1. All-equal similarities (identical embeddings)
    scale to 1 for every pair, the complete graph, with a warning."""
    k = len(similarity)
    off = ~np.eye(k, dtype=bool)
    out = np.zeros_like(similarity, dtype=np.float64)
    if k < 2:
        return out
    values = similarity[off]
    require(
        bool(np.isfinite(values).all()),
        f"client similarities hold non-finite values ({int((~np.isfinite(values)).sum())} of "
        f"{values.size} pairs): a client model diverged (NaN or inf parameters); lower the "
        "learning rate or check that client's data",
    )
    low, high = values.min(), values.max()
    if high > low:
        out[off] = (values - low) / (high - low)
    else:
        LOG.warning(
            "client similarities are all equal (%d clients, identical embeddings?): every pair "
            "scaled to 1, a complete graph",
            k,
        )
        out[off] = 1.0
    return out


def epsilon_graph(scaled: np.ndarray, epsilon: float) -> np.ndarray:
    """Symmetric 0/1 adjacency: edge (i, j), i != j, iff both scaled similarities >= epsilon."""
    adjacency = np.minimum(scaled, scaled.T) >= epsilon
    np.fill_diagonal(adjacency, False)
    return adjacency.astype(np.int8)


def _graph(adjacency: np.ndarray):
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(len(adjacency)))
    rows, cols = np.nonzero(np.triu(adjacency, 1))
    graph.add_edges_from((int(i), int(j)) for i, j in zip(rows, cols, strict=True))
    return graph


def pair_count(n: int) -> float:
    """(n-1)(n-2)/2: the pairs s != k != t of Sec. 3.2's betweenness sum at n nodes."""
    return (n - 1) * (n - 2) / 2.0 if n > 2 else 0.0


def _eigenvector(graph) -> dict[int, float]:
    """Eigenvector centrality per connected component: each component's principal eigenvector
    of its adjacency matrix, positive with unit norm over the component (networkx's
    normalisation for a connected graph), isolated nodes 0. networkx's own solver is defined on
    connected graphs only (it raises AmbiguousSolution on any other) and starts ARPACK from a
    random vector; a dense symmetric eigensolver per component is exact and deterministic."""
    import networkx as nx

    values = dict.fromkeys(graph.nodes, 0.0)
    for nodes in nx.connected_components(graph):
        if len(nodes) < 2:
            continue
        order = sorted(nodes)
        matrix = nx.to_numpy_array(graph, nodelist=order, dtype=np.float64)
        eigenvalues, eigenvectors = np.linalg.eigh(matrix)
        principal = eigenvectors[:, int(np.argmax(eigenvalues))]
        principal = principal / (np.sign(principal.sum()) * np.linalg.norm(principal))
        values.update(zip(order, (float(x) for x in principal), strict=True))
    return values


def _current_flow(graph, normalized: bool = False) -> dict[int, float]:
    """Current-flow betweenness (networkx; defined on connected graphs): computed on every
    connected component of 3 or more nodes (other nodes 0), unnormalised (each unordered pair's
    current through the node, summed, as the paper's betweenness); ``normalized`` scales it by
    2 / ((n-1)(n-2)) over the whole graph's n, as networkx normalises betweenness."""
    import networkx as nx

    n = graph.number_of_nodes()
    values = dict.fromkeys(graph.nodes, 0.0)
    for nodes in nx.connected_components(graph):
        if len(nodes) >= 3:
            part = nx.current_flow_betweenness_centrality(graph.subgraph(nodes), normalized=False)
            values.update(part)
    if not normalized:
        return values
    scale = 2.0 / ((n - 1) * (n - 2)) if n > 2 else 0.0
    return {node: value * scale for node, value in values.items()}


def _centrality_functions(normalized: bool) -> dict[str, Callable]:
    """kind -> centrality on the footing ``normalized`` asks for. Betweenness and current flow
    are computed on it directly; the others are networkx's normalised forms, scaled to the pair
    scale unless ``normalized``."""
    import networkx as nx

    def on_footing(function: Callable) -> Callable:
        if normalized:
            return function

        def raw(graph) -> dict[int, float]:
            scale = pair_count(graph.number_of_nodes())
            return {node: value * scale for node, value in function(graph).items()}

        return raw

    return {
        "betweenness": lambda g: nx.betweenness_centrality(g, normalized=normalized),
        "degree": on_footing(nx.degree_centrality),
        "closeness": on_footing(nx.closeness_centrality),
        "eigenvector": on_footing(_eigenvector),
        "pagerank": on_footing(lambda g: nx.pagerank(g, alpha=0.85)),
        "current_flow": lambda g: _current_flow(g, normalized),
    }


def centrality(
    adjacency: np.ndarray, kind: str = "betweenness", normalized_betweenness: bool = False
) -> np.ndarray:
    """Centrality of every node of the unweighted graph ``adjacency`` (networkx): with
    ``normalized_betweenness`` every kind's normalised form (within [0, 1]), else every kind on
    the pair scale of the TFL paper's unnormalised betweenness c_k (normalised x (n-1)(n-2)/2;
    betweenness itself is then the paper's c_k)."""
    require(kind in CENTRALITIES, f"unknown centrality {kind!r}; choose from {CENTRALITIES}")
    values = _centrality_functions(normalized_betweenness)[kind](_graph(adjacency))
    return np.array([float(values[i]) for i in range(len(adjacency))], dtype=np.float64)


def softmax(values: np.ndarray) -> np.ndarray:
    """exp(c_k) / sum_l exp(c_l), computed stably."""
    e = np.exp(values - values.max())
    return e / e.sum()


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto the probability simplex (sort-based)."""
    u = np.sort(v)[::-1]
    cumulative = np.cumsum(u) - 1.0
    index = np.arange(1, len(v) + 1)
    rho = np.nonzero(u - cumulative / index > 0)[0][-1]
    theta = cumulative[rho] / (rho + 1.0)
    return np.maximum(v - theta, 0.0)


def floor_weights(weights: np.ndarray, floor: float) -> np.ndarray:
    """Entries <= ``floor`` raised to ``floor``, then renormalised (the DRFA authors' code)."""
    out = np.where(weights <= floor, floor, weights)
    return out / out.sum()


LAMBDA_STARTS = ("uniform", "sizes")


def start_weights(start: str, federation: list[int], sizes: dict[int, int] | None) -> np.ndarray:
    """lambda^(0) over the federation clients: ``uniform`` 1/N each, or ``sizes`` n_i / n (the
    DRFA authors' start: proportional to the clients' training-set sizes)."""
    require(start in LAMBDA_STARTS, f"lambda_start must be one of {LAMBDA_STARTS}, got {start!r}")
    if start == "uniform":
        return np.full(len(federation), 1.0 / len(federation))
    require(sizes is not None, "lambda_start sizes: the engine gave no training-set sizes")
    assert sizes is not None
    counts = np.asarray([sizes[c] for c in federation], dtype=float)
    require(counts.sum() > 0, "lambda_start sizes: the federation clients have no training rows")
    return counts / counts.sum()


def dual_step_size(gamma: float, decay: float, round_index: int, local_steps: float = 1.0) -> float:
    """The dual step of DRFA and TFL in round ``round_index`` (0-based): tau * gamma_s with
    gamma_s = gamma * decay^(s+1) (DRFA's lambda <- Pi(lambda + tau gamma v); the authors
    multiply gamma by ``decay`` at the start of every round) and tau = ``local_steps``, the
    mean number of local SGD steps of the round's clients (DRFA's tau)."""
    require(local_steps >= 0, f"local_steps must be >= 0, got {local_steps}")
    return float(local_steps) * float(gamma) * float(decay) ** (round_index + 1)


def finite_losses(
    losses: np.ndarray, clients: Sequence[int], round_index: int, method: str
) -> tuple[np.ndarray, list[int]]:
    """The dual losses with every non-finite one (NaN or inf: the model diverged on that
    client) replaced by the round's largest finite loss, so a diverged client counts as the
    hardest client, never as an easy one; and the ids of the replaced ``clients`` (logged as a
    warning). An error when no loss is finite."""
    losses = np.asarray(losses, dtype=np.float64)
    finite = np.isfinite(losses)
    if finite.all():
        return losses, []
    bad = [int(c) for c, ok in zip(clients, finite, strict=True) if not ok]
    require(
        bool(finite.any()),
        f"{method}: round {round_index}: the model's loss is not finite on every client: "
        "training diverged; lower the learning rate",
    )
    LOG.warning(
        "%s: round %d: non-finite loss on clients %s; they take the round's largest finite "
        "loss in the dual step",
        method,
        round_index,
        bad,
    )
    return np.where(finite, losses, losses[finite].max()), bad


class StepCounter:
    """A loss hook (adds 0) that counts a client's local steps (tau of the dual step)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, model: torch.nn.Module) -> torch.Tensor:
        self.calls += 1
        return torch.zeros((), device=next(model.parameters()).device)


def dual_step(
    weights: np.ndarray,
    losses: np.ndarray,
    step: float,
    prior: np.ndarray | None = None,
    q: float = 0.0,
    floor: float = 1e-3,
) -> np.ndarray:
    """One projected ascent step on lambda: Pi(lambda + step * grad), then the floor.

    grad_k = loss_k - q (log(lambda_k / p_k) + 1): the gradient of sum_k lambda_k loss_k -
    q KL(lambda || p) (TFL, Eq. 6); q = 0 (or no prior) is DRFA's plain ascent.
    """
    grad = np.asarray(losses, dtype=np.float64).copy()
    if prior is not None and q > 0:
        grad = grad - q * (np.log(weights / prior) + 1.0)
    return floor_weights(project_simplex(weights + step * grad), floor)


@dataclass
class Topology:
    """One topology update: the graph, the centrality and the prior over the clients."""

    adjacency: np.ndarray  # [K, K] 0/1
    scaled: np.ndarray  # [K, K] normalised similarity
    centrality: np.ndarray  # [K]
    prior: np.ndarray  # [K]
    clusters: np.ndarray | None = None  # [K] cluster id per client (clustered variant)

    def record(self, round_index: int, clients: list[int]) -> dict:
        """A JSON-ready record (client ids, edges as client-id pairs, rounded numbers)."""
        k = len(self.adjacency)
        nodes = clients if self.clusters is None else list(range(k))
        edges = [
            [nodes[i], nodes[j]] for i in range(k) for j in range(i + 1, k) if self.adjacency[i, j]
        ]
        out = {
            "round": round_index,
            "nodes": nodes,
            "edges": edges,
            "similarity": [[round(float(x), 6) for x in row] for row in self.scaled],
            "centrality": [round(float(x), 6) for x in self.centrality],
            "prior": [round(float(x), 6) for x in self.prior],
        }
        if self.clusters is not None:
            out["clusters"] = [int(c) for c in self.clusters]
        return out


def learn_topology(
    vectors: torch.Tensor,
    similarity: str = "dot",
    epsilon: float = 0.4,
    kind: str = "betweenness",
    clusters: int = 0,
    seed: int = 0,
    normalized_betweenness: bool = False,
) -> Topology:
    """Client topology learning + the topological prior p = softmax(centrality).

    With ``clusters`` > 0 (and fewer clusters than clients) KMeans groups the client vectors, the
    graph is built over the cluster centroids and each client receives its cluster's prior mass
    split equally among the cluster's members.
    """
    k = len(vectors)
    if 0 < clusters < k:
        from sklearn.cluster import KMeans

        data = vectors.double().cpu().numpy()
        labels = KMeans(n_clusters=clusters, n_init=10, random_state=seed).fit_predict(data)
        present = sorted(set(int(c) for c in labels))
        relabel = {c: i for i, c in enumerate(present)}
        labels = np.array([relabel[int(c)] for c in labels])
        members = [torch.from_numpy(labels == c) for c in range(len(present))]
        centroids = torch.stack([vectors[m].double().mean(dim=0) for m in members])
        top = learn_topology(
            centroids, similarity, epsilon, kind, normalized_betweenness=normalized_betweenness
        )
        sizes = np.bincount(labels, minlength=len(present)).astype(np.float64)
        prior = top.prior[labels] / sizes[labels]
        return Topology(top.adjacency, top.scaled, top.centrality, prior, clusters=labels)
    scaled = normalise(similarity_matrix(vectors, similarity))
    adjacency = epsilon_graph(scaled, epsilon)
    values = centrality(adjacency, kind, normalized_betweenness)
    return Topology(adjacency, scaled, values, softmax(values))
