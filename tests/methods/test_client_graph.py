"""Client-graph centralities on disconnected graphs and on one footing (raw or normalised), and
the similarity scaling's handling of degenerate input."""

from __future__ import annotations

import logging
import math

import networkx as nx
import numpy as np
import pytest
import torch

from benchlib.errors import BenchlibError
from benchlib.methods.client_graph import (
    CENTRALITIES,
    centrality,
    finite_losses,
    learn_topology,
    normalise,
)


def _adjacency(graph: nx.Graph) -> np.ndarray:
    return nx.to_numpy_array(graph, nodelist=range(graph.number_of_nodes()), dtype=np.int8)


def _principal(adjacency: np.ndarray) -> np.ndarray:
    """The principal eigenvector (positive, unit norm) of a connected graph, by numpy."""
    values, vectors = np.linalg.eigh(adjacency.astype(np.float64))
    v = vectors[:, np.argmax(values)]
    return np.abs(v) / np.linalg.norm(v)


def _disconnected_with_edges(n: int, p: float, count: int) -> list[nx.Graph]:
    """The first ``count`` G(n, p) graphs (seeds 0, 1, ...) with edges and 2+ components."""
    found = []
    for seed in range(200):
        graph = nx.gnp_random_graph(n, p, seed=seed)
        if graph.number_of_edges() and nx.number_connected_components(graph) > 1:
            found.append(graph)
        if len(found) == count:
            return found
    raise AssertionError("too few disconnected graphs")


def test_eigenvector_by_hand_on_disconnected_graphs():
    # a triangle, one edge and an isolated node: each component's principal eigenvector with
    # unit norm over the component (1/sqrt 3 on the triangle, 1/sqrt 2 on the edge), 0 alone
    graph = nx.Graph([(0, 1), (1, 2), (0, 2), (3, 4)])
    graph.add_node(5)
    values = centrality(_adjacency(graph), "eigenvector", normalized_betweenness=True)
    r3, r2 = 1 / math.sqrt(3), 1 / math.sqrt(2)
    assert np.allclose(values, [r3, r3, r3, r2, r2, 0.0])
    # a single edge (a 2-node graph) has the same answer
    assert np.allclose(centrality(np.array([[0, 1], [1, 0]]), "eigenvector", True), [r2, r2])


def test_eigenvector_runs_on_random_disconnected_graphs():
    """G(24, 0.15) graphs with edges and an isolated node: networkx's solver raises
    AmbiguousSolution on the whole graph; per component it matches numpy's eigenvector."""
    for graph in _disconnected_with_edges(24, 0.15, 6):
        adjacency = _adjacency(graph)
        values = centrality(adjacency, "eigenvector", normalized_betweenness=True)
        # deterministic (networkx's ARPACK solver starts from a random vector)
        assert np.array_equal(values, centrality(adjacency, "eigenvector", True))
        for nodes in nx.connected_components(graph):
            nodes = sorted(nodes)
            if len(nodes) == 1:
                assert values[nodes[0]] == 0.0
            else:
                expected = _principal(adjacency[np.ix_(nodes, nodes)])
                assert np.allclose(values[nodes], expected, atol=1e-9)


def test_tfl_eigenvector_prior_on_a_graph_with_an_outlier():
    """Min-max scaling isolates an outlier client: the eigenvector prior still forms."""
    vectors = torch.tensor([[1.0, 1.0], [1.0, 1.1], [1.1, 1.0], [1.05, 1.05], [-5.0, 0.0]])
    top = learn_topology(vectors, epsilon=0.4, kind="eigenvector")
    assert top.adjacency[4].sum() == 0 and top.adjacency[:4, :4].sum() > 0
    assert top.centrality[4] == 0.0 and top.prior.sum() == pytest.approx(1.0)


PAIRS = 23 * 22 / 2  # (n-1)(n-2)/2 for the 24-node graphs below


@pytest.mark.parametrize("kind", CENTRALITIES)
def test_every_centrality_on_one_footing(kind):
    """Normalised: networkx's normalised forms, all within [0, 1]. Raw (the default, the paper's
    unnormalised betweenness): every centrality on the same pair scale, normalised x
    (n-1)(n-2)/2, so no centrality's prior is flat by its scale alone."""
    for graph in [*_disconnected_with_edges(24, 0.15, 2), nx.gnp_random_graph(24, 0.3, seed=1)]:
        adjacency = _adjacency(graph)
        normalised = centrality(adjacency, kind, normalized_betweenness=True)
        raw = centrality(adjacency, kind)
        assert normalised.min() >= 0 and normalised.max() <= 1 + 1e-12
        assert np.allclose(raw, normalised * PAIRS, rtol=1e-9, atol=1e-9)


def test_raw_centralities_of_a_star_by_hand():
    star = np.zeros((4, 4), dtype=int)
    star[0, 1:] = star[1:, 0] = 1
    pairs = 3  # (n-1)(n-2)/2 at n = 4
    # degree: 3/3 and 1/3 normalised; closeness: 1 and 3/5 (distances 1, 2, 2 from a leaf)
    assert np.allclose(centrality(star, "degree"), [pairs, pairs / 3, pairs / 3, pairs / 3])
    assert np.allclose(centrality(star, "closeness"), np.array([1, 0.6, 0.6, 0.6]) * pairs)
    assert np.allclose(centrality(star, "betweenness"), [3, 0, 0, 0])
    ev = np.array([math.sqrt(3), 1, 1, 1]) / math.sqrt(6)  # unit-norm principal eigenvector
    assert np.allclose(centrality(star, "eigenvector"), ev * pairs)
    assert np.allclose(centrality(star, "eigenvector", normalized_betweenness=True), ev)


# ------------------------------------------------------------------ degenerate input
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_normalise_rejects_non_finite_similarities(bad):
    """Before: min/max of a NaN array is NaN, so every pair was scaled to 1.0 (a complete
    graph, c = 0, a uniform prior) without a word."""
    s = np.array([[4.0, 1.0, 2.0], [1.0, 4.0, bad], [2.0, bad, 4.0]])
    with pytest.raises(BenchlibError, match="non-finite"):
        normalise(s)
    with pytest.raises(BenchlibError, match="non-finite"):
        learn_topology(torch.tensor([[1.0, 0.0], [float(bad), 1.0], [0.0, 2.0]]))


def test_equal_similarities_scale_to_one_with_a_warning(caplog):
    """Identical embeddings: every pair is equally similar, the complete graph, said aloud."""
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        scaled = normalise(np.full((3, 3), 5.0))
    assert np.allclose(scaled, 1 - np.eye(3))
    assert "all equal" in caplog.text
    top = learn_topology(torch.ones(4, 3))
    assert top.adjacency.sum() == 12 and np.allclose(top.prior, 0.25)


def test_non_finite_dual_losses_count_as_the_hardest_client(caplog):
    """A client whose loss is NaN or inf (a model that diverged on it) gets the round's largest
    finite loss, not 0 (before: 0, so the diverged client looked easy and lost weight)."""
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        losses, bad = finite_losses(np.array([0.5, np.nan, 2.0, np.inf]), [3, 4, 5, 6], 7, "tfl")
    assert losses.tolist() == [0.5, 2.0, 2.0, 2.0] and bad == [4, 6]
    assert "round 7" in caplog.text and "[4, 6]" in caplog.text
    same, none = finite_losses(np.array([0.5, 1.0]), [0, 1], 0, "tfl")
    assert same.tolist() == [0.5, 1.0] and none == []
    with pytest.raises(BenchlibError, match="every client"):
        finite_losses(np.array([np.nan, np.inf]), [0, 1], 2, "drfa")
