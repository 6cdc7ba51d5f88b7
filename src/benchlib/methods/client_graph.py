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

from benchlib.primitives.errors import require

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


EQUAL_SIMILARITIES = 1e-5  # relative spread below which client similarities count as equal
SCALINGS = ("minmax", "row", "max")


def similarity_magnitude(vectors: torch.Tensor, metric: str) -> float:
    """The magnitude the spread of ``metric``'s similarities is measured against: the largest
    squared norm for dot products (the diagonal of the dot-product matrix), 1 for cosine, the
    largest l2 / l1 norm of the vectors for the negated distances."""
    v = vectors.double()
    if metric == "dot":
        return float((v * v).sum(dim=1).max()) if len(v) else 0.0
    if metric == "cosine":
        return 1.0
    p = 2.0 if metric == "l2" else 1.0
    return float(v.norm(p=p, dim=1).max()) if len(v) else 0.0


def normalise(
    similarity: np.ndarray, magnitude: float | None = None, scaling: str = "minmax"
) -> np.ndarray:
    """The similarities on a [0, 1] scale for the epsilon threshold (diagonal set to 0).

    ``minmax`` (default): min-max scaling over all off-diagonal entries; ``row``: each client's
    row min-max scaled over the other clients (TFL Figure 4 scales client 10's row so; the graph
    keeps an edge when both rows reach epsilon); ``max``: divided by the largest off-diagonal
    similarity (dot, cosine: s / max s, negative values 0; the negated distances l1, l2:
    1 - d / max d).

    Non-finite similarities (a diverged model's NaN or inf) are an error: min and max would be
    NaN and every pair would silently become 1. Equal similarities are an equal-embedding case,
    not a graph: when the off-diagonal spread max - min is at most ``EQUAL_SIMILARITIES`` (1e-5)
    times ``magnitude`` (the similarities' own scale, :func:`similarity_magnitude`; default the
    largest absolute similarity), rounding noise (embeddings equal up to float rounding) would
    otherwise decide the graph; every pair scales to 1, the complete graph, with a warning that
    states the rule and the spread. Rounding of float32 embeddings moves dot products and
    distances by about 1e-7 of their magnitude; models that differ by 0.1 % move them by about
    1e-3 (cosine, second order in the difference: models within about 0.3 % in direction count
    as equal)."""
    require(scaling in SCALINGS, f"unknown similarity scaling {scaling!r}; choose from {SCALINGS}")
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
    low, high = float(values.min()), float(values.max())
    scale = float(np.abs(similarity).max()) if magnitude is None else float(magnitude)
    if high - low <= EQUAL_SIMILARITIES * scale:
        LOG.warning(
            "client similarities are equal up to rounding (%d clients: spread %.3g <= %g x "
            "magnitude %.6g; identical embeddings?): every pair scaled to 1, a complete graph",
            k,
            high - low,
            EQUAL_SIMILARITIES,
            scale,
        )
        out[off] = 1.0
        return out
    if scaling == "minmax":
        out[off] = (values - low) / (high - low)
    elif scaling == "row":
        for i in range(k):
            row = np.delete(similarity[i], i)
            lo, hi = row.min(), row.max()
            scaled = (row - lo) / (hi - lo) if hi > lo else np.ones_like(row)
            out[i, np.arange(k) != i] = scaled
    elif high > 0:  # max: the similarities as a share of the largest
        out[off] = np.clip(values / high, 0.0, 1.0)
    else:  # negated distances: 1 - d / max d
        out[off] = 1.0 - values / low
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
    """Eigenvector centrality on any graph, connected or not: the limit of networkx's power
    iteration on A + I from the all-ones start (``nx.eigenvector_centrality``), computed exactly.

    Per connected component c, v_c is its principal eigenvector (unit norm, positive) with the
    leading eigenvalue lambda_c. The iteration's limit keeps only the components whose lambda_c
    equals the graph's largest (within a relative 1e-9), each as v_c times (v_c . 1), the share
    of the start vector it carries, and is 0 on every other component: a component of outliers
    (a pair or a path cut off from the core) loses its importance, as the paper's appendix asks
    of outlier clients, instead of getting a unit vector of its own. An edgeless graph gives
    every node the same value. The result has unit norm over the graph. networkx itself raises
    on disconnected graphs only when the power iteration does not converge (two components with
    the same leading eigenvalue converge, to the same limit) and starts from floating-point
    sums whose last bits vary; the dense symmetric eigensolver per component is deterministic."""
    import networkx as nx

    values = dict.fromkeys(graph.nodes, 0.0)
    parts = []
    for nodes in nx.connected_components(graph):
        order = sorted(nodes)
        matrix = nx.to_numpy_array(graph, nodelist=order, dtype=np.float64)
        eigenvalues, eigenvectors = np.linalg.eigh(matrix)
        top = int(np.argmax(eigenvalues))
        principal = np.abs(eigenvectors[:, top])  # Perron vector: one sign, up to rounding
        principal = principal / np.linalg.norm(principal)
        parts.append((float(eigenvalues[top]), order, principal))
    if not parts:
        return values
    largest = max(value for value, _, _ in parts)
    tolerance = 1e-9 * max(1.0, abs(largest))
    for value, order, principal in parts:
        if largest - value <= tolerance:
            weighted = principal * principal.sum()
            values.update(zip(order, (float(x) for x in weighted), strict=True))
    norm = float(np.sqrt(sum(x * x for x in values.values())))
    return {node: x / norm for node, x in values.items()}


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
    adjacency: np.ndarray,
    kind: str = "betweenness",
    normalized_betweenness: bool = False,
    ordered_pairs: bool = False,
) -> np.ndarray:
    """Centrality of every node of the unweighted graph ``adjacency`` (networkx): with
    ``normalized_betweenness`` every kind's normalised form (within [0, 1]), else every kind on
    the pair scale of the TFL paper's unnormalised betweenness c_k (normalised x (n-1)(n-2)/2;
    betweenness itself is then the paper's c_k, each unordered pair {s, t} once).
    ``ordered_pairs`` counts (s, t) and (t, s) apart in the raw sum, doubling every raw value
    (the normalised forms do not change: their divisor doubles too)."""
    require(kind in CENTRALITIES, f"unknown centrality {kind!r}; choose from {CENTRALITIES}")
    values = _centrality_functions(normalized_betweenness)[kind](_graph(adjacency))
    out = np.array([float(values[i]) for i in range(len(adjacency))], dtype=np.float64)
    return out * 2.0 if ordered_pairs and not normalized_betweenness else out


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
TINY = float(np.finfo(np.float64).tiny)  # a prior entry of 0 is read as this (dual_step)


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
    q KL(lambda || p) (TFL, Eq. 6); q = 0 (or no prior) is DRFA's plain ascent. A prior entry
    p_k = 0 is a softmax that underflowed (c_k more than about 745 below the largest): it is
    read as the smallest positive double, 2.2e-308, so the KL term pulls lambda_k towards 0 (then
    the floor) as the true, tiny p_k would, without log(lambda / 0) (numpy's divide-by-zero and
    invalid-value warnings).
    """
    grad = np.asarray(losses, dtype=np.float64).copy()
    if prior is not None and q > 0:
        grad = grad - q * (np.log(weights / np.maximum(prior, TINY)) + 1.0)
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
    scaling: str = "minmax",
    ordered_pairs: bool = False,
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
            centroids,
            similarity,
            epsilon,
            kind,
            normalized_betweenness=normalized_betweenness,
            scaling=scaling,
            ordered_pairs=ordered_pairs,
        )
        sizes = np.bincount(labels, minlength=len(present)).astype(np.float64)
        prior = top.prior[labels] / sizes[labels]
        return Topology(top.adjacency, top.scaled, top.centrality, prior, clusters=labels)
    magnitude = similarity_magnitude(vectors, similarity)
    scaled = normalise(similarity_matrix(vectors, similarity), magnitude, scaling)
    adjacency = epsilon_graph(scaled, epsilon)
    values = centrality(adjacency, kind, normalized_betweenness, ordered_pairs)
    return Topology(adjacency, scaled, values, softmax(values))
