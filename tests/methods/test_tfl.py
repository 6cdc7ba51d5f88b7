"""TFL and its topology helpers against hand-computed graphs, centralities, priors, lambda."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
import pytest
import torch
from helpers.builders import build_method

from benchlib.methods.base import StarRound
from benchlib.methods.client_graph import (
    centrality,
    dual_step,
    epsilon_graph,
    learn_topology,
    normalise,
    project_simplex,
    similarity_matrix,
    softmax,
)
from benchlib.methods.tfl import TFL, draw_counts
from benchlib.models.vectors import ParamLayout
from benchlib.primitives.errors import BenchlibError


class FakeLayout:
    """Every entry a model parameter (a model without float buffers)."""

    def __init__(self, numels: tuple[int, ...]) -> None:
        self.numels = numels

    def parameter_mask(self, model: Any) -> torch.Tensor:
        return torch.ones(sum(self.numels), dtype=torch.bool)


class FakeTraining:
    """Records training calls; evaluate_loss returns fixed per-client losses."""

    def __init__(
        self,
        losses: dict[int, float],
        numels: tuple[int, ...] = (2,),
        layout: Any = None,
        steps: int = 1,
    ) -> None:
        self.losses = losses
        self.steps = steps  # local steps: calls of the loss hook per train()
        self.layout = FakeLayout(numels) if layout is None else layout
        self.models: list[Any] = [None] * (max(losses) + 1)
        self.trained: list[int] = []
        self.evaluated: list[tuple[int, list[float], str]] = []

    def train(self, client: int, loss_hook: Any = None, **_: Any) -> None:
        self.trained.append(client)
        for _ in range(self.steps if loss_hook is not None else 0):
            assert float(loss_hook(torch.nn.Linear(1, 1))) == 0.0

    def evaluate_loss(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        self.evaluated.append((client, vector.tolist(), subset))
        return self.losses[client]


def info(participants: list[int], round: int = 0) -> StarRound:
    sizes = torch.ones(len(participants), dtype=torch.float64)
    return StarRound(round, 10, sizes, sizes, participants=participants)


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


# ------------------------------------------------------------------ graph building blocks
def test_similarities_by_hand():
    v = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    assert np.allclose(similarity_matrix(v, "dot"), [[1, 1, 0], [1, 2, 2], [0, 2, 4]])
    r2 = 1 / math.sqrt(2)
    assert np.allclose(similarity_matrix(v, "cosine"), [[1, r2, 0], [r2, 1, r2], [0, r2, 1]])
    assert np.allclose(similarity_matrix(v, "l2")[0], [0, -1, -math.sqrt(5)])
    assert np.allclose(similarity_matrix(v, "l1")[0], [0, -1, -3])
    with pytest.raises(BenchlibError, match="unknown similarity"):
        similarity_matrix(v, "manhattan")


def test_min_max_normalisation_and_epsilon_graph():
    s = np.array([[9.0, 1.0, 0.0], [1.0, 9.0, 2.0], [0.0, 2.0, 9.0]])
    scaled = normalise(s)  # off-diagonal range [0, 2]; diagonal ignored and zeroed
    assert np.allclose(scaled, [[0, 0.5, 0], [0.5, 0, 1], [0, 1, 0]])
    assert epsilon_graph(scaled, 0.4).tolist() == [[0, 1, 0], [1, 0, 1], [0, 1, 0]]
    assert epsilon_graph(scaled, 0.6).tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]


def test_centralities_of_a_path_and_a_star():
    path = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]])
    # betweenness: the middle node is on the one 0-2 path ((n-1)(n-2)/2 = 1: normalised alike)
    assert np.allclose(centrality(path, "betweenness"), [0, 1, 0])
    assert np.allclose(centrality(path, "betweenness", normalized_betweenness=True), [0, 1, 0])
    # the others' normalised forms; raw, on the pair scale (x (n-1)(n-2)/2 = 1 here) alike
    for normalised in (True, False):
        assert np.allclose(centrality(path, "degree", normalised), [0.5, 1, 0.5])
        assert np.allclose(centrality(path, "closeness", normalised), [2 / 3, 1, 2 / 3])
    star = np.zeros((4, 4), dtype=int)
    star[0, 1:] = star[1:, 0] = 1
    # the centre is on the one shortest path of each of the C(3, 2) = 3 leaf pairs (paper Sec.
    # 3.2's c_k); networkx's normalised value divides by (n-1)(n-2)/2 = 3
    assert np.allclose(centrality(star, "betweenness"), [3, 0, 0, 0])
    assert np.allclose(centrality(star, "betweenness", normalized_betweenness=True), [1, 0, 0, 0])
    pr = centrality(star, "pagerank", normalized_betweenness=True)
    assert pr[0] > pr[1] == pytest.approx(pr[2]) and pr.sum() == pytest.approx(1.0)
    assert np.allclose(centrality(star, "pagerank"), 3 * pr)  # raw: x (n-1)(n-2)/2 = 3
    ev = centrality(star, "eigenvector")  # principal eigenvector of the star: (sqrt 3, 1, 1, 1)
    assert np.allclose(ev / ev[1], [math.sqrt(3), 1, 1, 1])
    # edgeless: every node alike (networkx's iteration keeps its uniform start), a uniform prior
    edgeless = centrality(np.zeros((3, 3), dtype=int), "eigenvector")
    assert np.allclose(edgeless, 1 / math.sqrt(3))


def _graph_of(n: int, edges: list[tuple[int, int]]) -> np.ndarray:
    adjacency = np.zeros((n, n), dtype=np.int8)
    for i, j in edges:
        adjacency[i, j] = adjacency[j, i] = 1
    return adjacency


def test_unnormalised_betweenness_by_hand():
    # path 0-1-2-3: node 1 lies on the (0,2) and (0,3) paths, node 2 on (0,3) and (1,3)
    path = _graph_of(4, [(0, 1), (1, 2), (2, 3)])
    assert np.allclose(centrality(path, "betweenness"), [0, 2, 2, 0])
    assert np.allclose(
        centrality(path, "betweenness", normalized_betweenness=True), [0, 2 / 3, 2 / 3, 0]
    )
    # a diamond 0-{1,2}-3 with a tail 3-4: sigma_st(k) / sigma_st counts split paths by halves
    # (0,3): 1 and 2 get 1/2 each; (0,4): 1, 2 get 1/2, 3 gets 1; (1,2): 0 and 3 get 1/2 each;
    # (1,4), (2,4): 3 gets 1 each; adjacent pairs: nothing
    diamond = _graph_of(5, [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)])
    c = np.array([0.5, 1.0, 1.0, 3.5, 0.0])
    assert np.allclose(centrality(diamond, "betweenness"), c)
    assert np.allclose(centrality(diamond, "betweenness", normalized_betweenness=True), c / 6)
    # the prior p = softmax(c): exp(c_k) / sum_l exp(c_l)
    top = learn_topology(
        torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    )
    # dot products: 0-j = 1, i-j = 0 for leaves -> the star centred on 0; c = (3, 0, 0, 0)
    assert top.adjacency.tolist() == _graph_of(4, [(0, 1), (0, 2), (0, 3)]).tolist()
    e3 = math.exp(3)
    assert np.allclose(top.prior, [e3 / (e3 + 3), 1 / (e3 + 3), 1 / (e3 + 3), 1 / (e3 + 3)])


def test_tfl_prior_from_unnormalised_betweenness_and_the_normalised_option():
    star = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    priors = {}
    for normalised in (False, True):
        params = {"update_every": 1, "normalized_betweenness": normalised}
        method = build_method("tfl", params)
        method.setup(4, 5, seed=0)
        method._start([0, 1, 2, 3])
        method._counts = dict.fromkeys(range(4), 1)
        method.train_client(FakeTraining(dict.fromkeys(range(4), 0.0), numels=(3,)), 0, 0)
        method.aggregate(torch.zeros(3), star, info([0, 1, 2, 3]))
        (record,) = method.summary()["topology"]
        priors[normalised] = record["prior"]
    e, e3 = math.e, math.exp(3)
    # paper: c = (3, 0, 0, 0), p_0 = e^3 / (e^3 + 3) = 0.870; normalised c = (1, 0, 0, 0),
    # p_0 = e / (e + 3) = 0.475
    assert np.allclose(priors[False], [e3 / (e3 + 3)] + [1 / (e3 + 3)] * 3, atol=1e-6)
    assert np.allclose(priors[True], [e / (e + 3)] + [1 / (e + 3)] * 3, atol=1e-6)
    with pytest.raises(BenchlibError):
        build_method("tfl", {"normalized_betweenness": "yes"})


def test_softmax_prior_and_simplex_projection():
    e = math.e
    assert np.allclose(softmax(np.array([0.0, 1.0, 0.0])), [1 / (2 + e), e / (2 + e), 1 / (2 + e)])
    assert np.allclose(project_simplex(np.array([0.5, 0.5, 0.5])), [1 / 3] * 3)
    assert np.allclose(project_simplex(np.array([2.0, 0.0, 0.0])), [1, 0, 0])
    assert np.allclose(project_simplex(np.array([0.6, 0.3, -0.1])), [0.65, 0.35, 0.0])


def test_kl_regularised_dual_step_by_hand():
    # grad = loss - q (log(lambda/p) + 1) = [1 - 0.1, 0 - 0.1]; lambda + 0.1 grad = [0.59, 0.49];
    # projection subtracts 0.04 from both
    lam = dual_step(np.array([0.5, 0.5]), np.array([1.0, 0.0]), 0.1, np.array([0.5, 0.5]), 0.1)
    assert np.allclose(lam, [0.55, 0.45])
    # the prior pulls lambda: equal losses, p = (0.8, 0.2), lambda = (0.5, 0.5):
    # grad = -0.1 (log(0.5/0.8) + 1, log(0.5/0.2) + 1) = (-0.05300, -0.19163)
    lam = dual_step(np.array([0.5, 0.5]), np.zeros(2), 1.0, np.array([0.8, 0.2]), 0.1)
    g = -0.1 * (np.log([0.5 / 0.8, 0.5 / 0.2]) + 1)
    shift = (g.sum()) / 2
    assert np.allclose(lam, 0.5 + g - shift) and lam[0] > 0.5
    # floor: entries <= 1e-3 raised to 1e-3, then renormalised
    lam = dual_step(np.array([0.5, 0.5]), np.array([100.0, 0.0]), 1.0)
    assert np.allclose(lam, [1 / 1.001, 0.001 / 1.001])


def test_clustered_topology_spreads_cluster_mass_over_members():
    v = torch.tensor([[1.0, 0.0], [1.1, 0.0], [0.0, 1.0], [0.0, 1.2], [0.0, 0.9]])
    top = learn_topology(v, "dot", 0.4, "betweenness", clusters=2, seed=0)
    assert top.clusters is not None
    assert top.clusters[0] == top.clusters[1] != top.clusters[2] == top.clusters[3]
    # two centroids: one edge, betweenness 0 for both, prior 1/2 per cluster, split per member
    assert top.adjacency.tolist() == [[0, 1], [1, 0]]
    sizes = {int(c): int((top.clusters == c).sum()) for c in top.clusters}
    assert np.allclose(top.prior, [0.5 / sizes[int(c)] for c in top.clusters])
    assert top.prior.sum() == pytest.approx(1.0)


# ------------------------------------------------------------------------ the method
def test_draws_follow_lambda_with_replacement():
    rng = np.random.default_rng(3)
    counts = draw_counts(np.array([0.0, 1.0, 0.0]), 4, rng)
    assert counts.tolist() == [0, 4, 0]
    expected = np.bincount(
        np.random.default_rng(5).choice(3, size=6, replace=True, p=[0.2, 0.3, 0.5]), minlength=3
    )
    assert draw_counts(np.array([2.0, 3.0, 5.0]), 6, np.random.default_rng(5)).tolist() == (
        expected.tolist()
    )


def test_tfl_round_by_hand():
    """Three clients whose models form the path 0-1-2: client 1 is central."""
    method = build_method("tfl", {"update_every": 1, "lr_lambda": 1.0, "lr_decay": 1.0})
    assert isinstance(method, TFL)
    method.setup(4, 10, seed=0)  # client 3 is held out: never in `clients`
    rng = np.random.default_rng(0)
    chosen = method.participants(0, [0, 1, 2], rng)
    counts = np.bincount(np.random.default_rng(0).choice(3, 3, p=[1 / 3] * 3), minlength=3)
    assert chosen == [c for c in range(3) if counts[c] > 0]
    # force every client in once for the hand computation
    method._counts = {0: 1, 1: 2, 2: 1}
    training = FakeTraining({0: 1.0, 1: 1.0, 2: 1.0})
    for c in (0, 1, 2):
        method.train_client(training, c, 0)
    received = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    new = method.aggregate(torch.zeros(2), received, info([0, 1, 2]))
    # draw counts 1, 2, 1 as weights
    assert torch.allclose(new, (received[0] + 2 * received[1] + received[2]) / 4)
    (record,) = method.summary()["topology"]
    # dot products: off-diagonal 1, 0, 2 -> scaled 0.5, 0, 1 -> edges 0-1, 1-2 at epsilon 0.4
    assert record["edges"] == [[0, 1], [1, 2]]
    e = math.e
    prior = np.array([1 / (2 + e), e / (2 + e), 1 / (2 + e)])
    assert np.allclose(record["prior"], prior, atol=1e-6)
    # losses of the new global model on every federation client, then the KL-regularised step
    assert [c for c, _, subset in training.evaluated] == [0, 1, 2]
    assert all(subset == "train" for _, _, subset in training.evaluated)
    lam0 = np.full(3, 1 / 3)
    grad = 1.0 - 0.1 * (np.log(lam0 / prior) + 1.0)
    expected = project_simplex(lam0 + grad)
    expected = np.maximum(expected, 1e-3) / np.maximum(expected, 1e-3).sum()
    assert np.allclose(method.summary()["lambda"][0], expected, atol=1e-6)
    assert expected[1] > expected[0]  # equal losses: the central client gains weight
    # checkpoint round trip keeps the state
    again = build_method("tfl", dict(update_every=1))
    again.setup(4, 10, seed=0)
    again.load_state_dict(roundtrip(method.state_dict()))
    assert again.summary() == method.summary()
    assert np.allclose(again.weights, method.weights)


def test_tfl_partial_embedding_uses_last_entries():
    method = build_method("tfl", dict(update_every=1, embedding_last=1))
    method.setup(3, 5, seed=0)
    method._start([0, 1, 2])
    method._counts = {0: 1, 1: 1, 2: 1}
    training = FakeTraining({0: 0.0, 1: 0.0, 2: 0.0}, numels=(3, 2))
    method.train_client(training, 0, 0)
    received = torch.tensor([[9.0, 9, 9, 1, 0], [0.0, 0, 0, 1, 1], [5.0, 5, 5, 0, 2]])
    method.aggregate(torch.zeros(5), received, info([0, 1, 2]))
    assert method.memory is not None and method.memory.shape == (3, 2)
    assert method.summary()["topology"][0]["edges"] == [[0, 1], [1, 2]]


def test_tfl_updates_the_graph_every_f_rounds_only():
    method = build_method("tfl", dict(update_every=2))
    method.setup(3, 5, seed=0)
    training = FakeTraining({0: 0.5, 1: 0.5, 2: 0.5})
    received = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    for r in range(4):
        method.participants(r, [0, 1, 2], np.random.default_rng(r))
        method._counts = {0: 1, 1: 1, 2: 1}
        method.train_client(training, 0, r)
        method.aggregate(torch.zeros(2), received, info([0, 1, 2], round=r))
    assert [t["round"] for t in method.summary()["topology"]] == [1, 3]
    assert len(method.summary()["lambda"]) == 4


def test_tfl_rejects_bad_parameters():
    with pytest.raises(BenchlibError, match="centrality"):
        build_method("tfl", {"centrality": "katz"})
    with pytest.raises(BenchlibError):
        build_method("tfl", {"update_every": 0})


@pytest.mark.parametrize("method", ["tfl", "drfa"])
def test_cells_record_lambda_and_graph_and_are_deterministic(tmp_path, method):
    from helpers.task_stores import groups_split, regression_store, task_cell_spec

    from benchlib.fl.engine import run_cell

    store = regression_store(tmp_path / "store", n=120, groups=5)
    split = groups_split(store, tmp_path / "split.csv", clients=5)
    params = {"update_every": 1} if method == "tfl" else {}
    spec = task_cell_spec("regression", method, method_params=params, clients=5, held_out=[4])
    spec["training"]["rounds"] = 3
    first = run_cell(spec, store, split, tmp_path / "a.json", tmp_path / "ck_a")
    second = run_cell(spec, store, split, tmp_path / "b.json", tmp_path / "ck_b")
    assert first == second
    summary = first["method_summary"]
    assert summary["federation"] == [0, 1, 2, 3]
    assert len(summary["lambda"]) == 3
    assert all(sum(lam) == pytest.approx(1.0, abs=1e-5) for lam in summary["lambda"])
    if method == "tfl":
        assert [t["round"] for t in summary["topology"]] == [0, 1, 2]
        assert all(len(t["prior_all"]) == 4 for t in summary["topology"])
    assert [c["client"] for c in first["held_out_clients"]] == [4]


# ------------------------------------------- similarity over parameters only (issue 24.1)
def _bn_model() -> torch.nn.Module:
    # vector order: 0.weight (2), 0.bias (1), 1.weight, 1.bias, 1.running_mean, 1.running_var
    # (1 each): parameters at entries 0-4, BatchNorm statistics at 5-6
    return torch.nn.Sequential(torch.nn.Linear(2, 1), torch.nn.BatchNorm1d(1))


def _tfl_topology(received: torch.Tensor, **params: Any) -> dict[str, Any]:
    method = build_method("tfl", dict(update_every=1, **params))
    method.setup(3, 5, seed=0)
    method._start([0, 1, 2])
    method._counts = {0: 1, 1: 1, 2: 1}
    training = FakeTraining({0: 0.0, 1: 0.0, 2: 0.0}, layout=ParamLayout.of(_bn_model()))
    training.models = [_bn_model()] * 3
    method.train_client(training, 0, 0)
    method.aggregate(torch.zeros(7), received, info([0, 1, 2]))
    assert method.memory is not None
    return {"width": method.memory.shape[1], **method.summary()["topology"][0]}


def test_tfl_similarity_ignores_batchnorm_statistics():
    # parameters as in test_tfl_round_by_hand: dot products 1 (0-1), 0 (0-2), 2 (1-2) -> the
    # path 0-1-2; with the buffers 0 and 2 would be the most similar pair (dot 200)
    received = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0, 0.0, 10.0, 10.0],
            [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            [0.0, 2.0, 0.0, 0.0, 0.0, 10.0, 10.0],
        ]
    )
    top = _tfl_topology(received)
    assert top["width"] == 5
    assert top["edges"] == [[0, 1], [1, 2]]
    assert np.allclose(top["similarity"], [[0, 0.5, 0], [0.5, 0, 1], [0, 1, 0]])
    changed = received.clone()
    changed[:, 5:] = torch.tensor([[0.0, -3.0], [50.0, 2.0], [7.0, 0.5]])
    assert _tfl_topology(changed) == top


def test_tfl_partial_embedding_counts_parameter_tensors_only():
    # embedding_last = 2: the last two *parameter* tensors (1.weight, 1.bias: entries 3-4),
    # not the BatchNorm statistics that end the vector
    received = torch.tensor(
        [
            [9.0, 9.0, 9.0, 1.0, 0.0, 5.0, 5.0],
            [0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0],
            [5.0, 5.0, 5.0, 0.0, 2.0, 5.0, 5.0],
        ]
    )
    top = _tfl_topology(received, embedding_last=2)
    assert top["width"] == 2
    assert top["edges"] == [[0, 1], [1, 2]]


def test_tfl_non_finite_loss_takes_the_largest_finite_loss():
    """Client 1's loss is NaN: lambda moves as if it had client 2's loss (the largest), and the
    summary records the round and client."""
    steps = {}
    for losses in ({0: 1.0, 1: float("nan"), 2: 3.0}, {0: 1.0, 1: 3.0, 2: 3.0}):
        method = build_method("tfl", {"update_every": 100})
        method.setup(3, 10, seed=0)
        method._start([0, 1, 2])
        method._counts = {0: 1, 1: 1, 2: 1}
        training = FakeTraining(losses)
        for c in (0, 1, 2):
            method.train_client(training, c, 0)
        method.aggregate(torch.zeros(2), torch.ones(3, 2), info([0, 1, 2]))
        steps[math.isnan(losses[1])] = method.summary()
    assert steps[True]["lambda"] == steps[False]["lambda"]
    assert steps[True]["lambda"][0][1] > steps[True]["lambda"][0][0]  # not "easy" any more
    assert steps[True]["nonfinite_losses"] == [{"round": 0, "clients": [1]}]
    assert "nonfinite_losses" not in steps[False]


def test_tfl_names_the_client_whose_embedding_is_not_finite():
    method = build_method("tfl", {"update_every": 1})
    method.setup(3, 10, seed=0)
    method._start([4, 5, 6])
    method._counts = {4: 1, 5: 1, 6: 1}
    training = FakeTraining({4: 1.0, 5: 1.0, 6: 1.0}, numels=(2,))
    training.models = [None] * 7
    for c in (4, 5, 6):
        method.train_client(training, c, 0)
    received = torch.tensor([[1.0, 0.0], [float("nan"), 1.0], [0.0, 2.0]])
    with pytest.raises(BenchlibError, match=r"clients \[5\].*non-finite"):
        method.aggregate(torch.zeros(2), received, info([4, 5, 6]))
