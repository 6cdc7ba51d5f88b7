"""The TFL / DRFA readings declared for the decisive TPT-48 run, each by hand on the method: the
embedding of a client not drawn recently, the similarity scaling, the client draws, the dual
step's schedule, DRFA's variant and ordered betweenness pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers.builders import build_method
from methods.test_tfl import FakeTraining, info

from benchlib.methods.client_graph import centrality, dual_step_size

PATH = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])  # dot products: the path 0-1-2


def tfl(**params):
    method = build_method("tfl", {"update_every": 2, **params})
    method.setup(4, 10, seed=0)
    method._start([0, 1, 2])
    return method


def test_embedding_current_trains_every_client_in_a_topology_round_at_weight_zero():
    method = tfl(embedding="current")
    method.weights = np.array([0.998, 0.001, 0.001])  # lambda at the floor but for client 0
    assert method.participants(0, [0, 1, 2], np.random.default_rng(0)) == [0]  # round 0
    # round 1 is a topology round ((1 + 1) % 2 == 0): every client trains
    assert method.participants(1, [0, 1, 2], np.random.default_rng(0)) == [0, 1, 2]
    assert method._extra == {1, 2}
    training = FakeTraining({0: 0.5, 1: 0.5, 2: 0.5}, steps=3)
    for c in (0, 1, 2):
        method.train_client(training, c, 1)
    new = method.aggregate(torch.zeros(2), PATH, info([0, 1, 2], round=1))
    assert torch.allclose(new, PATH[0])  # clients 1 and 2 trained for the graph only
    assert method.summary()["topology"][0]["nodes"] == [0, 1, 2]  # all three are nodes
    latest = tfl()
    latest.weights = np.array([0.998, 0.001, 0.001])
    assert latest.participants(1, [0, 1, 2], np.random.default_rng(0)) == [0]


def test_embedding_recent_leaves_out_clients_not_drawn_in_the_last_f_rounds():
    method = tfl(embedding="recent")
    training = FakeTraining({0: 0.5, 1: 0.5, 2: 0.5})
    method.memory = None
    method._remember(PATH, [0, 1, 2])  # every client transmitted once (round 0, say)
    method.last_drawn = np.array([3, 2, 0])  # client 2 last drawn in round 0
    method._counts = {0: 1, 1: 1}
    method.train_client(training, 0, 3)
    method.aggregate(torch.zeros(2), PATH[:2], info([0, 1], round=3))  # topology round 3
    (record,) = method.summary()["topology"]
    assert record["nodes"] == [0, 1]  # client 2 (drawn 3 rounds ago, f = 2) left out
    prior = record["prior_all"]
    assert prior[2] == pytest.approx(min(prior[:2]))  # the smallest node mass
    stale = tfl()  # latest: client 2's old model stays a node
    stale.memory = None
    stale._remember(PATH, [0, 1, 2])
    stale._counts = {0: 1, 1: 1}
    stale.train_client(training, 0, 3)
    stale.aggregate(torch.zeros(2), PATH[:2], info([0, 1], round=3))
    assert stale.summary()["topology"][0]["nodes"] == [0, 1, 2]


def test_draws_without_replacement_train_every_client_and_weight_models_by_lambda():
    method = tfl(draws="without_replacement", update_every=5)
    method.weights = np.array([0.5, 0.3, 0.2])
    assert method.participants(0, [0, 1, 2], np.random.default_rng(0)) == [0, 1, 2]
    training = FakeTraining({0: 0.5, 1: 0.5, 2: 0.5})
    method.train_client(training, 0, 0)
    new = method.aggregate(torch.zeros(2), PATH, info([0, 1, 2]))
    assert torch.allclose(new, 0.5 * PATH[0] + 0.3 * PATH[1] + 0.2 * PATH[2])
    drfa = build_method("drfa", {"draws": "without_replacement", "gamma": 0.0})
    drfa.setup(3, 10, seed=0)
    drfa._start([0, 1, 2])
    drfa.weights = np.array([0.5, 0.3, 0.2])
    assert drfa.participants(0, [0, 1, 2], np.random.default_rng(0)) == [0, 1, 2]


def test_dual_schedule_alternatives_by_hand():
    # tau_decay (default): tau * gamma * 0.9^(s+1); no_tau drops tau; no_decay keeps gamma
    assert dual_step_size(0.01, 0.9, 2, 9.0) == pytest.approx(9 * 0.01 * 0.9**3)
    assert dual_step_size(0.01, 1.0, 2, 9.0) == pytest.approx(9 * 0.01)
    drfa = build_method("drfa", {"local_step_scale": False})
    assert drfa.local_step_scale is False
    method = tfl(local_step_scale=False)
    assert method._local_steps([0]) == 1.0


def test_ordered_pairs_double_the_raw_centrality_only():
    star = np.zeros((4, 4), dtype=int)
    star[0, 1:] = star[1:, 0] = 1
    assert np.allclose(centrality(star), [3, 0, 0, 0])
    assert np.allclose(centrality(star, ordered_pairs=True), [6, 0, 0, 0])
    normalised = centrality(star, normalized_betweenness=True)
    assert np.allclose(centrality(star, "betweenness", True, ordered_pairs=True), normalised)
    method = tfl(ordered_pairs=True, update_every=1)
    method.memory = None
    star_vectors = torch.tensor(
        [[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    )
    method.setup(4, 5, seed=0)
    method._start([0, 1, 2, 3])
    method._counts = dict.fromkeys(range(4), 1)
    method.train_client(FakeTraining(dict.fromkeys(range(4), 0.0), numels=(3,)), 0, 0)
    method.aggregate(torch.zeros(3), star_vectors, info([0, 1, 2, 3]))
    e6 = math.exp(6)
    prior = method.summary()["topology"][0]["prior"]
    assert np.allclose(prior, [e6 / (e6 + 3)] + [1 / (e6 + 3)] * 3, atol=1e-6)


def test_similarity_scaling_reaches_the_graph():
    method = tfl(scaling="max", update_every=1)
    method.memory = None
    method._counts = {0: 1, 1: 1, 2: 1}
    method.train_client(FakeTraining({0: 0.0, 1: 0.0, 2: 0.0}), 0, 0)
    method.aggregate(torch.zeros(2), PATH, info([0, 1, 2]))
    # dot products off the diagonal 1, 0, 2: / 2 -> 0.5, 0, 1: edges 0-1 and 1-2 (as min-max
    # here); the record holds the scaled matrix
    record = method.summary()["topology"][0]
    assert record["similarity"][0][1] == pytest.approx(0.5)
    assert record["similarity"][1][2] == pytest.approx(1.0)
