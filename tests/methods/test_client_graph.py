"""Client-graph centralities on disconnected graphs and on one footing (raw or normalised), and
the similarity scaling's handling of degenerate input."""

from __future__ import annotations

import logging
import math

import networkx as nx
import numpy as np
import pytest
import torch

from benchlib.methods.client_graph import (
    CENTRALITIES,
    centrality,
    dual_step,
    finite_losses,
    learn_topology,
    normalise,
)
from benchlib.primitives.errors import BenchlibError


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
    # a triangle (leading eigenvalue 2), one edge (1) and an isolated node (0): the limit of
    # networkx's power iteration keeps the triangle only, 1/sqrt 3 each; the edge and the
    # isolated node get 0 (before: the edge got its own unit vector, 1/sqrt 2 > 1/sqrt 3)
    graph = nx.Graph([(0, 1), (1, 2), (0, 2), (3, 4)])
    graph.add_node(5)
    values = centrality(_adjacency(graph), "eigenvector", normalized_betweenness=True)
    r3, r2 = 1 / math.sqrt(3), 1 / math.sqrt(2)
    assert np.allclose(values, [r3, r3, r3, 0.0, 0.0, 0.0])
    # a single edge (a 2-node graph): 1/sqrt 2 each
    assert np.allclose(centrality(np.array([[0, 1], [1, 0]]), "eigenvector", True), [r2, r2])
    # two equal edges tie: both kept, each with its share of the start vector (1/2 each)
    two = _adjacency(nx.Graph([(0, 1), (2, 3)]))
    assert np.allclose(centrality(two, "eigenvector", True), [0.5] * 4)
    # an edgeless graph: every node the same, as networkx's iteration on I leaves its start
    assert np.allclose(centrality(np.zeros((4, 4)), "eigenvector", True), [0.5] * 4)
    # networkx agrees on all three
    for g in (graph, nx.Graph([(0, 1), (2, 3)]), nx.empty_graph(4)):
        expected = nx.eigenvector_centrality(g, max_iter=10_000, tol=1e-13)
        ours = centrality(_adjacency(g), "eigenvector", True)
        assert np.allclose(ours, [expected[i] for i in range(len(ours))], atol=1e-6)


def _networkx_eigenvector(graph: nx.Graph) -> np.ndarray | None:
    """networkx's power-iteration eigenvector centrality, or None where it does not converge."""
    try:
        values = nx.eigenvector_centrality(graph, max_iter=20_000, tol=1e-13)
    except nx.PowerIterationFailedConvergence:
        return None
    return np.array([values[i] for i in range(graph.number_of_nodes())])


def test_eigenvector_matches_networkx_and_no_side_component_outranks_the_core():
    """200 random G(58, 0.05) graphs (58 = eICU's federation; most have side components):
    ours equals networkx's power iteration wherever it converges, is 0 on every component whose
    leading eigenvalue is below the graph's largest, and its argmax (the prior's argmax, raw
    footing) lies in the core, the largest component. The former per-component unit vectors put
    the argmax outside the core in 51 of these graphs (a 2-client side component: 1/sqrt 2)."""
    converged = 0
    for seed in range(200):
        graph = nx.gnp_random_graph(58, 0.05, seed=seed)
        adjacency = _adjacency(graph)
        values = centrality(adjacency, "eigenvector", normalized_betweenness=True)
        assert np.linalg.norm(values) == pytest.approx(1.0)
        components = sorted(nx.connected_components(graph), key=len, reverse=True)
        core = components[0]
        leading = {
            frozenset(c): float(np.linalg.eigvalsh(nx.to_numpy_array(graph, sorted(c)))[-1])
            for c in components
        }
        top = max(leading.values())
        for component, value in leading.items():
            if value < top - 1e-9:
                assert np.all(values[sorted(component)] == 0.0)
        prior = learn_topology_prior(adjacency)
        assert int(np.argmax(prior)) in core
        assert max(values[sorted(core)]) >= values.max()
        expected = _networkx_eigenvector(graph)
        if expected is not None:
            converged += 1
            assert np.allclose(values, expected, atol=1e-6)
    assert converged >= 150  # networkx converges on most of them


def learn_topology_prior(adjacency: np.ndarray) -> np.ndarray:
    """The TFL prior softmax(eigenvector centrality) on the raw footing."""
    from benchlib.methods.client_graph import softmax

    return softmax(centrality(adjacency, "eigenvector"))


def test_eigenvector_runs_on_random_disconnected_graphs():
    """G(24, 0.15) graphs with edges and an isolated node: deterministic; on the core (the
    component with the largest leading eigenvalue) numpy's principal eigenvector."""
    for graph in _disconnected_with_edges(24, 0.15, 6):
        adjacency = _adjacency(graph)
        values = centrality(adjacency, "eigenvector", normalized_betweenness=True)
        # deterministic (networkx's ARPACK solver starts from a random vector)
        assert np.array_equal(values, centrality(adjacency, "eigenvector", True))
        core = sorted(max(nx.connected_components(graph), key=len))
        assert np.allclose(values[core], _principal(adjacency[np.ix_(core, core)]), atol=1e-9)
        rest = [i for i in range(24) if i not in core]
        assert np.all(values[rest] == 0.0)


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
    assert "equal up to rounding" in caplog.text and "1e-05 x magnitude" in caplog.text
    top = learn_topology(torch.ones(4, 3))
    assert top.adjacency.sum() == 12 and np.allclose(top.prior, 0.25)


@pytest.mark.parametrize("metric", ["dot", "cosine", "l2", "l1"])
def test_embeddings_equal_up_to_rounding_give_the_complete_graph_with_a_warning(metric, caplog):
    """23 float32 embeddings equal up to rounding (one ulp of relative noise): min-max scaling
    of the rounding noise gave a graph of 190 of the 253 pairs, with no warning. The rule: a
    spread of at most 1e-5 times the similarities' magnitude is equality."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=2000)
    noisy = base * (1 + rng.normal(0, 6e-8, size=(23, 2000)))
    vectors = torch.tensor(noisy, dtype=torch.float32)
    assert len({tuple(v.tolist()) for v in vectors}) == 23  # not bit-equal
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        top = learn_topology(vectors, similarity=metric)
    assert top.adjacency.sum() == 2 * 253 and "equal up to rounding" in caplog.text
    assert np.allclose(top.prior, 1 / 23)
    # models that differ by 0.1 % are distinct: a real graph, no warning (cosine's spread is
    # second order in the difference: 1 % there)
    caplog.clear()
    noise = 1e-2 if metric == "cosine" else 1e-3
    distinct = torch.tensor(base * (1 + rng.normal(0, noise, size=(23, 2000))), dtype=torch.float32)
    with caplog.at_level(logging.WARNING, logger="benchlib"):
        real = learn_topology(distinct, similarity=metric)
    assert "equal up to rounding" not in caplog.text and real.adjacency.sum() < 2 * 253


def test_similarity_scalings_by_hand():
    s = np.array([[9.0, 4.0, 2.0], [4.0, 9.0, 3.0], [2.0, 3.0, 9.0]])
    # min-max over the off-diagonal pairs: (s - 2) / (4 - 2)
    assert np.allclose(normalise(s), [[0, 1, 0], [1, 0, 0.5], [0, 0.5, 0]])
    # per row over the other clients: row 0 (4, 2) -> (1, 0); row 1 (4, 3) -> (1, 0);
    # row 2 (2, 3) -> (0, 1)
    assert np.allclose(normalise(s, scaling="row"), [[0, 1, 0], [1, 0, 0], [0, 1, 0]])
    # divided by the largest off-diagonal similarity
    assert np.allclose(normalise(s, scaling="max"), [[0, 1, 0.5], [1, 0, 0.75], [0.5, 0.75, 0]])
    # negated distances: 1 - d / max d
    d = -np.array([[0.0, 1.0, 4.0], [1.0, 0.0, 2.0], [4.0, 2.0, 0.0]])
    assert np.allclose(normalise(d, scaling="max"), [[0, 0.75, 0], [0.75, 0, 0.5], [0, 0.5, 0]])
    with pytest.raises(BenchlibError, match="unknown similarity scaling"):
        normalise(s, scaling="zscore")


def test_a_zero_prior_entry_takes_the_smallest_double_without_numpy_warnings():
    """softmax underflow gives p_k = 0 (57 of 58 on a star under the raw footing); the dual
    step read log(lambda / 0) = inf with numpy's divide-by-zero and invalid-value warnings. Now
    p_k = 0 is read as 2.2e-308: the KL term pushes lambda_k to 0, then to the floor."""
    weights = np.full(3, 1 / 3)
    prior = np.array([1.0, 0.0, 0.0])
    with np.errstate(all="raise"):
        out = dual_step(weights, np.zeros(3), 1.0, prior, q=0.1, floor=1e-3)
        tiny = dual_step(weights, np.zeros(3), 1.0, np.array([1.0, 1e-300, 1e-300]), 0.1, 1e-3)
    # by hand: grad = -0.1 (log(1/3 / p) + 1) = (0.0099, -70.8, -70.8): Pi gives (1, 0, 0),
    # the floor (1, 0.001, 0.001) / 1.002
    assert np.allclose(out, np.array([1.0, 1e-3, 1e-3]) / 1.002)
    assert np.allclose(out, tiny)
    # a star of 58 clients, raw footing: the prior underflows on the 57 leaves
    star = np.zeros((58, 58), dtype=np.int8)
    star[0, 1:] = star[1:, 0] = 1
    from benchlib.methods.client_graph import softmax

    p = softmax(centrality(star))
    assert (p == 0).sum() == 57
    with np.errstate(all="raise"):
        step = dual_step(np.full(58, 1 / 58), np.ones(58), 0.5, p, q=0.1)
    assert np.isfinite(step).all() and step.sum() == pytest.approx(1.0)


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
