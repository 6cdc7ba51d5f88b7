"""DRFA against hand-computed snapshots, aggregations and dual steps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from helpers.builders import build_method
from torch import nn

from benchlib.methods.base import StarRound, sample_clients
from benchlib.methods.client_graph import project_simplex
from benchlib.methods.drfa import DRFA, SnapshotHook
from benchlib.models.vectors import ParamLayout
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.seeding import numpy_rng


class Scalar(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))


class FakeTraining:
    """Simulates ``steps`` local steps: the parameter equals the step index when the hook runs,
    and the final model has value ``steps``; evaluate_loss returns fixed losses."""

    def __init__(self, losses: dict[int, float], steps: int) -> None:
        self.losses = losses
        self.steps = steps
        self.models = {c: Scalar() for c in losses}
        self.layout = ParamLayout.of(Scalar())
        self.evaluated: list[tuple[int, float]] = []

    def train(self, client: int, loss_hook: Any = None, **_: Any) -> None:
        model = self.models[client]
        for j in range(self.steps):
            with torch.no_grad():
                model.w.fill_(float(j))
            if loss_hook is not None:
                assert float(loss_hook(model)) == 0.0
        with torch.no_grad():
            model.w.fill_(float(self.steps))

    def evaluate_loss(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        self.evaluated.append((client, float(vector[0])))
        return self.losses[client]


def reservoir(seed_rng: np.random.Generator, steps: int) -> int | None:
    """The step the hook keeps, replayed by hand: step j >= 1 replaces with probability 1/j."""
    kept = None
    for j in range(1, steps):
        if seed_rng.random() < 1.0 / j:
            kept = j
    return kept


def test_snapshot_hook_keeps_a_step_between_1_and_tau_minus_1():
    for seed in range(5):
        hook = SnapshotHook(ParamLayout.of(Scalar()), np.random.default_rng(seed))
        training = FakeTraining({0: 0.0}, steps=6)
        training.train(0, loss_hook=hook)
        assert hook.calls == 6
        assert hook.snapshot is not None
        assert float(hook.snapshot[0]) == reservoir(np.random.default_rng(seed), 6)
    one = SnapshotHook(ParamLayout.of(Scalar()), np.random.default_rng(0))
    FakeTraining({0: 0.0}, steps=1).train(0, loss_hook=one)
    assert one.snapshot is None  # tau = 1: the server falls back to the starting model


def run_round(method: DRFA, training: FakeTraining, participants: list[int], round: int = 0):
    for c in participants:
        method.train_client(training, c, round)
    received = torch.stack([training.layout.flatten(training.models[c]) for c in participants])
    sizes = torch.ones(len(participants), dtype=torch.float64)
    info = StarRound(round, 10, sizes, sizes, participants=participants)
    return method.aggregate(torch.tensor([0.5]), received, info)


def test_paper_variant_round_by_hand():
    method = build_method("drfa", {"gamma": 0.1, "dual_clients": 3})
    assert isinstance(method, DRFA)
    method.setup(3, 10, seed=7)
    chosen = method.participants(0, [0, 1, 2], np.random.default_rng(1))
    counts = np.bincount(
        np.random.default_rng(1).choice(3, 3, replace=True, p=[1 / 3] * 3), minlength=3
    )
    assert chosen == [c for c in range(3) if counts[c] > 0]
    method._counts = {0: 2, 1: 1, 2: 1}
    training = FakeTraining({0: 1.0, 1: 2.0, 2: 4.0}, steps=4)
    new = run_round(method, training, [0, 1, 2])
    assert float(new[0]) == pytest.approx(4.0)  # every final model is 4; counts 2,1,1 weights
    snaps = [reservoir(numpy_rng(7, "drfa/snapshot", 0, c), 4) for c in range(3)]
    assert [v for _, v in training.evaluated] == [pytest.approx(np.mean(snaps))] * 3
    # U = all 3 clients: v = (3/3) loss; step tau * gamma * 0.9 = 4 * 0.09
    lam = project_simplex(np.full(3, 1 / 3) + 4 * 0.1 * 0.9 * np.array([1.0, 2.0, 4.0]))
    lam = np.maximum(lam, 1e-3) / np.maximum(lam, 1e-3).sum()
    assert np.allclose(method.summary()["lambda"][0], lam, atol=1e-6)
    assert lam[2] > lam[1] > lam[0]  # the worst-off client gains weight


def test_authors_variant_aggregation_and_uniform_dual_set():
    method = build_method(
        "drfa", dict(variant="authors", clients_per_round=2, dual_clients=2, gamma=0.0)
    )
    method.setup(4, 10, seed=3)
    rng = np.random.default_rng(2)
    chosen = method.participants(0, [0, 1, 2, 3], rng)
    assert chosen == sample_clients(np.ones(4), 2, np.random.default_rng(2))
    method.weights = np.array([0.1, 0.2, 0.3, 0.4])
    training = FakeTraining({c: 1.0 for c in range(4)}, steps=3)
    new = run_round(method, training, chosen)
    # w <- w - sum_i lambda_i (N/m)(w - w_i), w = 0.5, every w_i = 3
    lam = np.array([0.1, 0.2, 0.3, 0.4])
    expected = 0.5 - sum(lam[c] * 4 / 2 * (0.5 - 3.0) for c in chosen)
    assert float(new[0]) == pytest.approx(expected)
    dual = sample_clients(np.ones(4), 2, numpy_rng(3, "drfa/dual", 0))
    assert sorted(c for c, _ in training.evaluated) == dual
    # gamma 0: lambda only re-floored / projected (already on the simplex)
    assert np.allclose(method.summary()["lambda"][0], [0.1, 0.2, 0.3, 0.4])


def test_state_round_trip_and_bad_variant():
    method = build_method("drfa", {})
    method.setup(3, 5, seed=0)
    method._start([0, 1, 2])
    method.weights = np.array([0.2, 0.3, 0.5])
    method.lambda_history = [[0.2, 0.3, 0.5]]
    other = build_method("drfa", {})
    other.setup(3, 5, seed=0)
    other.load_state_dict(method.state_dict())
    assert np.allclose(other.weights, [0.2, 0.3, 0.5]) and other.summary() == method.summary()
    with pytest.raises(BenchlibError, match="variant"):
        build_method("drfa", {"variant": "fedtorch"})


def test_tfl_with_q_zero_takes_drfas_lambda_step():
    """Issue 24 item 9: one dual step size for both (tau * gamma * decay^(s+1)). TFL with q = 0
    (prior never learned: uniform) and DRFA with U = every client see the same losses and
    local steps, so their lambdas agree round after round."""

    losses = {0: 0.2, 1: 0.5, 2: 0.9, 3: 0.4}
    drfa = build_method("drfa", dict(gamma=0.1, gamma_decay=0.9, dual_clients=4))
    tfl = build_method("tfl", dict(q=0.0, lr_lambda=0.1, lr_decay=0.9, update_every=100))
    for method in (drfa, tfl):
        method.setup(4, 10, seed=5)
    for r in range(3):
        for method in (drfa, tfl):
            method.participants(r, [0, 1, 2, 3], np.random.default_rng(r))
            method._counts = {c: 1 for c in range(4)}
            run_round(method, FakeTraining(losses, steps=5), [0, 1, 2, 3], round=r)
    assert np.allclose(tfl.summary()["lambda"], drfa.summary()["lambda"], atol=1e-12)
    # round 0 by hand: lambda + 5 * 0.1 * 0.9 * loss, projected, floored
    lam = project_simplex(np.full(4, 0.25) + 5 * 0.09 * np.array([0.2, 0.5, 0.9, 0.4]))
    lam = np.maximum(lam, 1e-3) / np.maximum(lam, 1e-3).sum()
    assert np.allclose(tfl.summary()["lambda"][0], lam, atol=1e-6)
    # without local_step_scale TFL drops tau (the former schedule): a smaller step
    plain = build_method("tfl", dict(q=0.0, update_every=100, local_step_scale=False))
    plain.setup(4, 10, seed=5)
    plain.participants(0, [0, 1, 2, 3], np.random.default_rng(0))
    plain._counts = {c: 1 for c in range(4)}
    run_round(plain, FakeTraining(losses, steps=5), [0, 1, 2, 3])
    lam = project_simplex(np.full(4, 0.25) + 0.09 * np.array([0.2, 0.5, 0.9, 0.4]))
    assert np.allclose(plain.summary()["lambda"][0], lam, atol=1e-6)


def test_dual_set_holds_m_clients_even_when_one_client_was_drawn():
    """Issue 24 (Table 4 diagnosis): U holds m clients (m = N by default), however few distinct
    clients the draws by lambda hit. Before, |U| was the distinct participants: with lambda on
    one client, U was one random client and v = N * its loss took all the mass."""
    method = build_method("drfa", dict(gamma=0.1, gamma_decay=1.0))
    method.setup(4, 10, seed=1)
    method.participants(0, [0, 1, 2, 3], np.random.default_rng(0))
    method._counts = {2: 4}  # all four draws hit client 2
    losses = {0: 0.3, 1: 0.1, 2: 0.2, 3: 0.4}
    training = FakeTraining(losses, steps=2)
    run_round(method, training, [2])
    assert sorted(c for c, _ in training.evaluated) == [0, 1, 2, 3]
    # v = (4/4) loss on every client; step tau * gamma = 2 * 0.1
    lam = project_simplex(np.full(4, 0.25) + 0.2 * np.array([0.3, 0.1, 0.2, 0.4]))
    assert np.allclose(method.summary()["lambda"][0], lam, atol=1e-9)


def test_drfa_non_finite_loss_takes_the_largest_finite_loss():
    lambdas = {}
    for bad in (True, False):
        method = build_method("drfa", {"gamma": 0.1, "dual_clients": 3})
        method.setup(3, 10, seed=7)
        method.participants(0, [0, 1, 2], np.random.default_rng(1))
        method._counts = {0: 1, 1: 1, 2: 1}
        training = FakeTraining({0: 1.0, 1: float("inf") if bad else 4.0, 2: 4.0}, steps=4)
        run_round(method, training, [0, 1, 2])
        lambdas[bad] = method.summary()
    assert lambdas[True]["lambda"] == lambdas[False]["lambda"]
    assert lambdas[True]["nonfinite_losses"] == [{"round": 0, "clients": [1]}]
    assert "nonfinite_losses" not in lambdas[False]


@pytest.mark.parametrize("name", ["drfa", "tfl"])
def test_lambda_starts_uniform_or_proportional_to_the_training_sizes(name):
    """``lambda_start: sizes`` (the DRFA authors' start): n_i / n over the federation clients
    the engine names (held-out client 1 left out); ``uniform`` (the default): 1/N."""
    sizes = {0: 10, 1: 500, 2: 30, 3: 60}
    for params, expected in (
        ({}, [1 / 3] * 3),
        ({"lambda_start": "uniform"}, [1 / 3] * 3),
        ({"lambda_start": "sizes"}, [0.1, 0.3, 0.6]),
    ):
        method = build_method(name, params)
        method.setup(4, 10, seed=0)
        method.set_train_sizes(sizes)
        method.participants(0, [0, 2, 3], np.random.default_rng(0))
        assert method.weights.tolist() == pytest.approx(expected, abs=1e-15)


def test_a_sizes_start_without_sizes_is_an_error():
    method = build_method("drfa", dict(lambda_start="sizes"))
    method.setup(3, 10, seed=0)
    with pytest.raises(BenchlibError, match="the engine gave no training-set sizes"):
        method.participants(0, [0, 1, 2], np.random.default_rng(0))
