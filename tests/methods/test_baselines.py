"""The eight LIGHTYEAR baselines on small vectors, against values computed by hand or with plain
numpy/scipy/scikit-learn here in the test (never against the code's own earlier output)."""

from __future__ import annotations

import io
import math
from itertools import combinations
from typing import Any

import numpy as np
import pytest
import torch
from helpers.builders import build_method
from scipy.spatial.distance import cdist
from sklearn.cluster import AgglomerativeClustering
from torch import nn

from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.data import BatchSource, ClientData
from benchlib.fl.engine import LocalTraining
from benchlib.fl.optim import build_optimizer
from benchlib.methods.asmr import outlier_factors
from benchlib.methods.base import PeerEvaluator, PeerView, StarRound
from benchlib.methods.cfl import optimal_bipartition
from benchlib.methods.robust_utils import proximal_hook
from benchlib.models.vectors import ParamLayout
from benchlib.primitives.errors import BenchlibError
from benchlib.tasks import get_task

BIG = 1e30


# ------------------------------------------------------------------------------ helpers
def rows(*values: Any) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def star_info(sizes: list[float], batches: list[float] | None = None, round: int = 0) -> StarRound:
    train = torch.tensor(sizes, dtype=torch.float64)
    batch = train if batches is None else torch.tensor(batches, dtype=torch.float64)
    return StarRound(round=round, num_rounds=10, train_sizes=train, batch_counts=batch)


def setup(method: Any, clients: int, rounds: int = 10) -> Any:
    method.setup(clients, rounds, seed=0)
    return method


def no_evaluator() -> PeerEvaluator:
    def fail(_: torch.Tensor) -> torch.Tensor:
        raise AssertionError("this method must not evaluate peers")

    return PeerEvaluator(fail, torch.zeros(1, dtype=torch.long))


def roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    """Through torch.save / torch.load(weights_only=True), as the engine's checkpoints go."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def softmax_ce_grad(w: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray):
    """Gradient of mean cross-entropy of the linear model z = x w^T + b (numpy, by hand)."""
    z = x @ w.T + b
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = (p - np.eye(w.shape[0])[y]) / len(y)
    return g.T @ x, g.sum(axis=0)


def linear_context(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    global_vector: torch.Tensor,
    cfg: dict[str, Any],
    round: int = 0,
    optimizers: list[torch.optim.Optimizer] | None = None,
) -> LocalTraining:
    """A one-client LocalTraining whose single batch holds all of (x, y)."""
    settings = TrainingSettings.from_config("training", {"rounds": 1, **cfg})
    rows = np.arange(len(y))
    data = ClientData({"train": rows, "val": rows[:0], "test": rows[:0]})
    source = BatchSource(x.numpy(), y.numpy(), get_task("classification"), rows)
    return LocalTraining(
        models=[model],
        optimizers=optimizers
        or [build_optimizer(list(model.parameters()), **settings.optimizer_fields())],
        clients=[data],
        source=source,
        settings=settings,
        loss_fn=nn.CrossEntropyLoss(),
        seed=0,
        round=round,
        layout=ParamLayout.of(model),
        global_vector=global_vector,
    )


X = torch.tensor([[1.0, 0.5], [-0.3, 2.0], [0.7, -1.2], [1.5, 0.1]])
Y = torch.tensor([0, 1, 1, 0])


def linear_model(seed: int = 0) -> nn.Linear:
    torch.manual_seed(seed)
    return nn.Linear(2, 2)


def wb(vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split a flat Linear(2, 2) vector into (weight, bias)."""
    return vector[:4].reshape(2, 2), vector[4:]


# ----------------------------------------------------------------------------- FedProx
def test_proximal_hook_is_mu_half_squared_distance_over_parameters_only() -> None:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    model[1].running_mean.fill_(5.0)  # a float buffer far from the anchor: must not count
    layout = ParamLayout.of(model)
    anchor = torch.randn(layout.size)
    hook = proximal_hook(model, anchor, layout, coeff=0.3)
    value = hook(model)
    value.backward()

    names = ["0.weight", "0.bias", "1.weight", "1.bias"]
    flat = {n: p.detach().numpy() for n, p in model.named_parameters()}
    offsets, start = {}, 0
    for name, numel in zip(layout.names, layout.numels, strict=True):
        offsets[name] = (start, start + numel)
        start += numel
    a = anchor.numpy()
    expected = 0.0
    for name in names:
        lo, hi = offsets[name]
        diff = flat[name].ravel() - a[lo:hi]
        expected += 0.15 * float(diff @ diff)
        grad = dict(model.named_parameters())[name].grad.numpy().ravel()
        np.testing.assert_allclose(grad, 0.3 * diff, rtol=1e-5)
    assert value.item() == pytest.approx(expected, rel=1e-5)


def test_fedprox_local_step_adds_the_proximal_gradient() -> None:
    model = linear_model()
    layout = ParamLayout.of(model)
    w0 = layout.flatten(model).numpy().astype(np.float64)
    anchor = torch.tensor([0.2, -0.1, 0.4, 0.3, -0.5, 0.6])  # the round's global model
    cfg = {"optimizer": "sgd", "lr": 0.1, "batch_size": 64, "local_epochs": 1}
    training = linear_context(model, X, Y, anchor, cfg)
    build_method("fedprox", dict(mu=0.5)).train_client(training, 0, 0)

    gw, gb = softmax_ce_grad(*wb(w0), X.numpy().astype(np.float64), Y.numpy())
    grad = np.concatenate([gw.ravel(), gb]) + 0.5 * (w0 - anchor.numpy())
    np.testing.assert_allclose(layout.flatten(model).numpy(), w0 - 0.1 * grad, rtol=1e-5)


def test_fedprox_aggregates_by_training_set_size() -> None:
    received = rows([1.0, 0.0], [0.0, 2.0], [4.0, 4.0])
    out = build_method("fedprox", {}).aggregate(torch.zeros(2), received, star_info([1, 2, 1]))
    np.testing.assert_allclose(out.numpy(), [(1 + 0 + 4) / 4, (0 + 4 + 4) / 4], rtol=1e-6)


# --------------------------------------------------------------------------------- Krum
KRUM_POINTS = rows([0, 0], [1, 0], [0, 2], [1, 1], [9, 9])


def test_krum_scores_and_pick_by_hand() -> None:
    # n = 5, f = 1 (largest with 2f + 2 < n), n - f - 2 = 2 nearest, squared distances:
    # d2(0,.) = 1, 4, 2, 162 -> 3;  d2(1,.) = 1, 5, 1, 145 -> 2;  d2(2,.) = 4, 5, 2, 130 -> 6;
    # d2(3,.) = 2, 1, 2, 128 -> 3;  d2(4,.) = 162, 145, 130, 128 -> 258.   Krum picks client 1.
    krum = setup(build_method("krum", {}), 5)
    assert krum.byzantine_bound(5) == 1
    out = krum.aggregate(torch.zeros(2), KRUM_POINTS, star_info([1] * 5))
    np.testing.assert_array_equal(out.numpy(), [1, 0])
    assert krum.summary() == {"selected": [[1]]}


def test_krum_squares_the_distances() -> None:
    # squared distances: d2(0,.) = 45, 61, 52, 13; d2(1,.) = 45, 202, 1, 100;
    # d2(2,.) = 61, 202, 221, 18; d2(3,.) = 52, 1, 221, 113; d2(4,.) = 13, 100, 18, 113.
    # Two nearest: scores 58, 46, 79, 53, 31 -> client 4. (Unsquared distances would pick
    # client 1: 1 + sqrt 45 = 7.71 < sqrt 13 + sqrt 18 = 7.85.)  Multi-Krum m = 3: 4, 1, 3.
    points = rows([0, 0], [3, 6], [-6, -5], [4, 6], [-3, -2])
    out = setup(build_method("krum", {}), 5).aggregate(torch.zeros(2), points, star_info([1] * 5))
    np.testing.assert_array_equal(out.numpy(), [-3, -2])
    out = setup(build_method("krum", dict(m=3)), 5).aggregate(
        torch.zeros(2), points, star_info([1] * 5)
    )
    np.testing.assert_allclose(out.numpy(), [4 / 3, 10 / 3], rtol=1e-6)


def test_multi_krum_averages_the_m_best() -> None:
    krum = setup(build_method("krum", dict(m=3)), 5)  # scores 2, 3, 3 -> clients 1, 0, 3
    out = krum.aggregate(torch.zeros(2), KRUM_POINTS, star_info([1] * 5))
    np.testing.assert_allclose(out.numpy(), [2 / 3, 1 / 3], rtol=1e-6)
    assert krum.selected == [[0, 1, 3]]


def test_krum_with_explicit_f_against_numpy() -> None:
    rng = np.random.default_rng(3)
    points = rng.normal(size=(7, 4))
    krum = setup(build_method("krum", dict(f=2, m=2)), 7)
    out = krum.aggregate(
        torch.zeros(4), torch.tensor(points, dtype=torch.float32), star_info([1] * 7)
    )
    d2 = ((points[:, None, :] - points[None, :, :]) ** 2).sum(axis=2)
    scores = [sorted(d2[i, j] for j in range(7) if j != i)[:3] for i in range(7)]
    best = np.argsort([sum(s) for s in scores])[:2]
    np.testing.assert_allclose(out.numpy(), points[best].mean(axis=0), rtol=1e-5)


def test_krum_authors_variant_unsquared_with_f_half() -> None:
    rng = np.random.default_rng(4)
    points = rng.normal(size=(8, 3))
    points[2] += 5.0
    krum = setup(build_method("krum", dict(variant="authors")), 8)
    out = krum.aggregate(
        torch.zeros(3), torch.tensor(points, dtype=torch.float32), star_info([1] * 8)
    )
    dist = np.sqrt(((points[:, None, :] - points[None, :, :]) ** 2).sum(axis=2))
    k = 8 - 8 // 2 - 2  # 2 neighbours
    scores = [sum(sorted(dist[i, j] for j in range(8) if j != i)[:k]) for i in range(8)]
    np.testing.assert_allclose(out.numpy(), points[int(np.argmin(scores))], rtol=1e-6)


def test_krum_authors_variant_with_four_clients_takes_the_first() -> None:
    # f = 4 // 2 = 2 leaves n - f - 2 = 0 neighbours: every score is 0, the first client wins
    krum = setup(build_method("krum", dict(variant="authors")), 4)
    received = rows([50, 50], [0, 0], [0, 1], [1, 0])
    out = krum.aggregate(torch.zeros(2), received, star_info([1] * 4))
    np.testing.assert_array_equal(out.numpy(), [50, 50])


def test_krum_rejects_impossible_parameters() -> None:
    with pytest.raises(BenchlibError):
        setup(build_method("krum", dict(f=2)), 4)  # n - f - 2 = 0
    with pytest.raises(BenchlibError):
        build_method("krum", dict(f=1, variant="authors"))
    with pytest.raises(BenchlibError):
        build_method("krum", {"variant": "bogus"})  # variants: the catalog


# ---------------------------------------------------------------------------------- AFA
def beta_cdf_half(alpha: int, beta: int) -> float:
    """P(p < 0.5) for p ~ Beta(alpha, beta), integer parameters: a binomial tail (by hand)."""
    n = alpha + beta - 1
    return sum(math.comb(n, j) for j in range(alpha, n + 1)) / 2**n


def afa_reference(
    rounds: list[np.ndarray], sizes: np.ndarray, dxi: float = 0.5
) -> tuple[list[np.ndarray], list[list[int]], list[int], list[int], list[int]]:
    """AFA (Algorithm 1 + Beta reputation), written independently with numpy."""
    n = len(sizes)
    alpha, beta, blocked = [3] * n, [3] * n, []
    outputs, flagged = [], []
    for vectors in rounds:
        p = np.array([alpha[k] / (alpha[k] + beta[k]) for k in range(n)])
        good, bad, xi = [k for k in range(n) if k not in blocked], [], 2.0
        while True:
            w = p[good] * sizes[good]
            merged = (w[:, None] * vectors[good]).sum(axis=0) / w.sum()
            sims = np.array(
                [
                    vectors[k] @ merged / np.linalg.norm(vectors[k]) / np.linalg.norm(merged)
                    for k in good
                ]
            )
            mean, median, std = sims.mean(), np.median(sims), sims.std()
            if mean < median:
                new = [k for k, s in zip(good, sims, strict=True) if s < median - xi * std]
            else:
                new = [k for k, s in zip(good, sims, strict=True) if s > median + xi * std]
            if not new:
                break
            good = [k for k in good if k not in new]
            bad += new
            xi += dxi
        for k in good:
            alpha[k] += 1
        for k in bad:
            beta[k] += 1
        blocked += [k for k in good + bad if beta_cdf_half(alpha[k], beta[k]) >= 0.95]
        outputs.append(merged)
        flagged.append(sorted(bad))
    return outputs, flagged, sorted(blocked), alpha, beta


SYMMETRIC = np.array(
    [[1, 0.5, 0], [1, -0.5, 0], [1, 0, 0.5], [1, 0, -0.5], [-1, 0, 0]], dtype=np.float64
)


def test_afa_flags_and_blocks_a_persistent_outlier_by_hand() -> None:
    # Round 1: the weighted mean (0.6, 0, 0) gives sims c, c, c, c, -1 (c = 1/sqrt(1.25));
    # mean < median = c, std = 2(c + 1)/5, so the threshold c - 0.8(c + 1) > -1 flags client 4;
    # without it the mean is (1, 0, 0), all sims equal, nothing else is flagged.
    # Client 4 collects beta = 3 + r after r rounds; P(p < 0.5) = I_0.5(3, 3 + r) first reaches
    # 0.95 at r = 6 (I_0.5(3, 8) = 968/1024 = 0.945, I_0.5(3, 9) = 1981/2048 = 0.967).
    assert beta_cdf_half(3, 8) == pytest.approx(968 / 1024)
    assert beta_cdf_half(3, 9) == pytest.approx(1981 / 2048)
    afa = setup(build_method("afa", {}), 5)
    received = torch.tensor(SYMMETRIC, dtype=torch.float32)
    for r in range(7):
        out = afa.aggregate(torch.zeros(3), received, star_info([10] * 5, round=r))
        np.testing.assert_allclose(out.numpy(), [1, 0, 0], atol=1e-7)
        assert afa.blocked == ([] if r < 5 else [4])
    assert afa.flagged == [[4]] * 6 + [[]]  # blocked in round 7: no longer considered
    assert afa.beta == [3, 3, 3, 3, 9] and afa.alpha == [10, 10, 10, 10, 3]


def test_afa_reputation_weights_against_numpy_reference() -> None:
    rng = np.random.default_rng(7)
    base = rng.normal(size=6) + 3.0
    rounds = []
    for r in range(4):
        vectors = base + 0.3 * rng.normal(size=(6, 6))
        if r < 2:
            vectors[5] = -2.0 * base  # client 5 misbehaves twice, then looks benign
        rounds.append(vectors)
    sizes = np.array([30.0, 10.0, 20.0, 40.0, 15.0, 25.0])
    expected, flagged, blocked, alpha, beta = afa_reference(rounds, sizes)

    afa = setup(build_method("afa", {}), 6)
    for r, vectors in enumerate(rounds):
        out = afa.aggregate(
            torch.zeros(6),
            torch.tensor(vectors, dtype=torch.float32),
            star_info(list(sizes), round=r),
        )
        np.testing.assert_allclose(out.numpy(), expected[r], rtol=1e-5)
    assert afa.flagged == flagged and flagged[0] == [5] and flagged[1] == [5]
    assert (afa.alpha, afa.beta, afa.blocked) == (alpha, beta, blocked)


def test_afa_authors_variant_weights_batches_and_never_blocks() -> None:
    received = rows([1, 0, 0], [2, 0, 0], [3, 0, 0], [-1, 0, 0])
    sizes, batches = [10, 10, 40, 10], [1, 2, 3, 4]
    paper = setup(build_method("afa", {}), 4).aggregate(
        torch.zeros(3), received, star_info(sizes, batches)
    )
    assert paper[0].item() == pytest.approx((10 + 20 + 120) / 60)
    afa = setup(build_method("afa", dict(variant="authors")), 4)
    for r in range(10):
        out = afa.aggregate(torch.zeros(3), received, star_info(sizes, batches, round=r))
        assert out[0].item() == pytest.approx((1 + 4 + 9) / 6)
    assert afa.blocked == [] and afa.flagged == [[3]] * 10
    assert afa.delta_xi == 0.25


def test_afa_state_survives_a_checkpoint() -> None:
    afa = setup(build_method("afa", {}), 5)
    received = torch.tensor(SYMMETRIC, dtype=torch.float32)
    for r in range(3):
        afa.aggregate(torch.zeros(3), received, star_info([10] * 5, round=r))
    resumed = setup(build_method("afa", {}), 5)
    resumed.load_state_dict(roundtrip(afa.state_dict()))
    for r in range(3, 7):
        afa.aggregate(torch.zeros(3), received, star_info([10] * 5, round=r))
        resumed.aggregate(torch.zeros(3), received, star_info([10] * 5, round=r))
    assert resumed.summary() == afa.summary() and resumed.blocked == [4]


# --------------------------------------------------------------------------------- ASMR
def angles(*degrees: float) -> torch.Tensor:
    scales = [1.0, 3.0, 0.5, 2.0, 7.0, 1.5]  # lengths do not matter, only angles
    return torch.tensor(
        [
            [s * math.cos(math.radians(d)), s * math.sin(math.radians(d))]
            for s, d in zip(scales, degrees, strict=False)
        ],
        dtype=torch.float32,
    )


def asmr_reference(vectors: np.ndarray, variant: str) -> list[int]:
    n = len(vectors)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    if variant == "paper":
        dist = np.linalg.norm(unit[:, None] - unit[None], axis=2)
        density = 1 / (dist.sum(axis=1) / (n - 1))
        factor = density / density.mean()
    else:
        dist = 1 - unit @ unit.T
        np.fill_diagonal(dist, 0)
        density = 1 / (dist.sum(axis=1) / (n - 1) + 1)
        factor = density / (density.mean() + 1)
    order = np.argsort(factor, kind="stable")
    cut = int(np.argmax(np.diff(factor[order]))) + 1
    return sorted(order[:cut].tolist())


@pytest.mark.parametrize("variant", ["paper", "authors"])
def test_asmr_outlier_factors_against_numpy(variant: str) -> None:
    received = angles(3, 7, 49, 115, 146)
    unit = received.double().numpy()
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    if variant == "paper":
        dist = np.linalg.norm(unit[:, None] - unit[None], axis=2)
        density = 4 / dist.sum(axis=1)
        expected = density / density.mean()
    else:
        dist = 1 - unit @ unit.T
        np.fill_diagonal(dist, 0)
        density = 1 / (dist.sum(axis=1) / 4 + 1)
        expected = density / (density.mean() + 1)
    np.testing.assert_allclose(outlier_factors(received, variant).numpy(), expected, rtol=1e-9)


def test_asmr_gap_split_by_hand() -> None:
    # unit vectors at 0, 10, 20 and 180 degrees: the 180-degree client has the lowest density
    # (mean distance (2 sin 90 + 2 sin 85 + 2 sin 80)/3 = 1.9870 vs <= 1.0 for the others), so its
    # outlier factor is alone below the largest gap.
    received = angles(0, 10, 20, 180)
    asmr = setup(build_method("asmr", {}), 4)
    out = asmr.aggregate(torch.zeros(2), received, star_info([1] * 4))
    assert asmr.flagged == [[3]]
    np.testing.assert_allclose(out.numpy(), received[:3].double().mean(dim=0).numpy(), rtol=1e-6)


def test_asmr_variants_split_differently_against_numpy() -> None:
    received = angles(3, 7, 49, 115, 146)
    for variant, expected in (("paper", [4]), ("authors", [0, 1, 3, 4])):
        assert asmr_reference(received.double().numpy(), variant) == expected
        asmr = setup(build_method("asmr", dict(variant=variant)), 5)
        out = asmr.aggregate(torch.zeros(2), received, star_info([1] * 5))
        assert asmr.flagged == [expected]
        benign = [k for k in range(5) if k not in expected]
        np.testing.assert_allclose(
            out.numpy(), received[benign].double().mean(dim=0).numpy(), rtol=1e-6
        )


@pytest.mark.parametrize("variant", ["paper", "authors"])
def test_asmr_removes_nobody_when_all_factors_are_equal(variant: str) -> None:
    asmr = setup(build_method("asmr", dict(variant=variant)), 3)
    asmr.aggregate(torch.zeros(2), rows([1, 0], [0, 1]), star_info([1] * 2))
    asmr.aggregate(torch.zeros(2), rows([1, 0], [3, 0], [0.5, 0]), star_info([1] * 3))
    assert asmr.flagged == [[], []]  # two models; three parallel ones (all distances 0)


# ---------------------------------------------------------------------------------- CFL
def test_optimal_bipartition_minimises_the_largest_cross_similarity() -> None:
    rng = np.random.default_rng(11)
    for _ in range(20):
        a = rng.uniform(-1, 1, size=(6, 6))
        sim = (a + a.T) / 2
        first, second = optimal_bipartition(torch.tensor(sim))
        assert sorted(first + second) == list(range(6)) and first and second
        best = min(
            max(sim[i, j] for i in group for j in range(6) if j not in group)
            for size in range(1, 6)
            for group in combinations(range(6), size)
        )
        assert max(sim[i, j] for i in first for j in second) == pytest.approx(best)


UPDATES = rows([1, 0, 0], [1, 0.1, 0], [-1, 0, 0], [-1, 0, 0.1])


class RecordingTraining:
    """Duck-typed LocalTraining: records the model each client starts its training from."""

    def __init__(self, global_vector: torch.Tensor, clients: int) -> None:
        self.models = [nn.Linear(1, 3, bias=False) for _ in range(clients)]
        self.layout = ParamLayout.of(self.models[0])
        self.global_vector = global_vector
        self.started: dict[int, list[float]] = {}

    def train(self, client: int, **_: Any) -> None:
        self.started[client] = self.layout.flatten(self.models[client]).tolist()


def test_cfl_bipartitions_when_both_criteria_hold() -> None:
    # mean update (0, 0.025, 0.025): norm 0.035 < eps1; max update norm 1.005 > eps2 -> split
    # cos(u0, u1) = 0.995, cos(u2, u3) = 0.995, cross similarities <= -0.99 -> {0, 1}, {2, 3}
    g = torch.tensor([0.5, 0.5, 0.5])
    cfl = setup(build_method("cfl", dict(eps1=0.4, eps2=0.5)), 4)
    out = cfl.aggregate(g, g + UPDATES, star_info([1] * 4))
    assert cfl.clusters == [[0, 1], [2, 3]]
    first = [1.5, 0.55, 0.5]  # g + mean of u0, u1
    second = [-0.5, 0.5, 0.55]
    np.testing.assert_allclose(out.numpy(), first, rtol=1e-6)  # largest cluster, tie -> first
    for client, expected in ((0, first), (1, first), (2, second), (3, second)):
        np.testing.assert_allclose(cfl.evaluation_vector(client, g).numpy(), expected, rtol=1e-6)
    # cross similarities: cos(u0, u2) = -1, cos(u0, u3) = cos(u1, u2) = -1/sqrt(1.01),
    # cos(u1, u3) = -1/1.01, the largest
    assert cfl.splits[0]["max_cross_similarity"] == pytest.approx(-1 / 1.01, rel=1e-5)

    training = RecordingTraining(g, 4)
    for client in range(4):
        cfl.train_client(training, client, 1)
    np.testing.assert_allclose(training.started[1], first, rtol=1e-6)
    np.testing.assert_allclose(training.started[3], second, rtol=1e-6)


def test_cfl_keeps_one_cluster_when_the_mean_update_is_large() -> None:
    g = torch.zeros(3)
    updates = rows([1, 0, 0], [3, 0, 0], [2, 1, 0], [1, -1, 0])
    cfl = setup(build_method("cfl", dict(eps1=0.4, eps2=0.5)), 4)
    out = cfl.aggregate(g, g + updates, star_info([1, 1, 2, 4]))
    # weighted mean update (1 + 3 + 4 + 4, 0 + 0 + 2 - 4, 0) / 8 has norm 1.52 > eps1
    np.testing.assert_allclose(out.numpy(), [12 / 8, -2 / 8, 0], rtol=1e-6)
    assert cfl.clusters == [[0, 1, 2, 3]] and cfl.splits == []


def test_cfl_clusters_persist_across_rounds_and_checkpoints() -> None:
    g = torch.zeros(3)
    cfl = setup(build_method("cfl", dict(eps1=0.4, eps2=0.5)), 4)
    cfl.aggregate(g, g + UPDATES, star_info([1] * 4, round=0))
    resumed = setup(build_method("cfl", dict(eps1=0.4, eps2=0.5)), 4)
    resumed.load_state_dict(roundtrip(cfl.state_dict()))
    assert resumed.clusters == [[0, 1], [2, 3]]
    # round 2: each cluster gets its own members' updates relative to its own model
    for method in (cfl, resumed):
        models = [method.evaluation_vector(k, g).clone() for k in range(4)]
        step = rows([0.1, 0, 0], [0.3, 0, 0], [0, 0, 1], [0, 0, 3])
        method.aggregate(g, torch.stack(models) + step, star_info([1] * 4, round=1))
        np.testing.assert_allclose(
            method.evaluation_vector(0, g).numpy(),
            models[0].numpy() + np.array([0.2, 0, 0]),
            rtol=1e-6,
        )
        np.testing.assert_allclose(
            method.evaluation_vector(3, g).numpy(),
            models[3].numpy() + np.array([0, 0, 2]),
            rtol=1e-6,
        )
    assert resumed.summary() == cfl.summary()


@pytest.mark.filterwarnings("ignore:The symmetric non-negative hollow")
def test_cfl_authors_majority_filter_matches_scikit_learn() -> None:
    rng = np.random.default_rng(5)
    for n, outliers in ((5, [3]), (4, [0, 1]), (6, [1, 4])):
        vectors = rng.normal(size=(n, 8)) + 4.0
        vectors[outliers] = -vectors[outliers] + rng.normal(size=(len(outliers), 8))
        features = np.nan_to_num(cdist(vectors, vectors, "cosine"), nan=-1, posinf=1, neginf=-1)
        labels = AgglomerativeClustering(n_clusters=2, linkage="complete").fit(features).labels_
        ones = [k for k in range(n) if labels[k] == 1]
        benign = ones if len(ones) > n // 2 else [k for k in range(n) if labels[k] == 0]
        cfl = setup(build_method("cfl", dict(variant="authors")), n)
        received = torch.tensor(vectors, dtype=torch.float32)
        out = cfl.aggregate(torch.zeros(8), received, star_info([1] * n))
        assert cfl.history == [benign]
        np.testing.assert_allclose(out.numpy(), vectors[benign].mean(axis=0), rtol=1e-5)
        assert cfl.evaluation_vector(0, out) is out  # one global model for everybody


# -------------------------------------------------------------------------------- Ditto
def test_ditto_personal_update_with_persistent_optimizer_state() -> None:
    cfg = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "batch_size": 64, "local_epochs": 1}
    x64, y = X.numpy().astype(np.float64), Y.numpy()
    model = linear_model(2)
    layout = ParamLayout.of(model)
    w0 = layout.flatten(model).numpy().astype(np.float64)
    ditto = setup(build_method("ditto", dict(lam=0.7)), 1)

    # round 0: the personal model starts at w^0 (the proximal gradient vanishes)
    training = linear_context(model, X, Y, torch.tensor(w0, dtype=torch.float32), cfg)
    ditto.train_client(training, 0, 0)
    g0 = np.concatenate([a.ravel() for a in softmax_ce_grad(*wb(w0), x64, y)])
    v1 = w0 - 0.1 * g0
    np.testing.assert_allclose(ditto.personal[0].numpy(), v1, rtol=1e-5)
    np.testing.assert_allclose(layout.flatten(model).numpy(), v1, rtol=1e-5)  # global copy too

    # round 1 (after a checkpoint): new global w^1; SGD momentum buffer g0 carries over
    resumed = setup(build_method("ditto", dict(lam=0.7)), 1)
    resumed.load_state_dict(roundtrip(ditto.state_dict()))
    w1 = w0 + np.array([0.3, -0.2, 0.1, 0.0, 0.25, -0.4])
    layout.load(model, torch.tensor(w1, dtype=torch.float32))
    training = linear_context(
        model,
        X,
        Y,
        torch.tensor(w1, dtype=torch.float32),
        cfg,
        round=1,
        optimizers=training.optimizers,
    )
    resumed.train_client(training, 0, 1)
    g1 = np.concatenate([a.ravel() for a in softmax_ce_grad(*wb(v1), x64, y)]) + 0.7 * (v1 - w1)
    v2 = v1 - 0.1 * (0.9 * g0 + g1)
    np.testing.assert_allclose(resumed.personal[0].numpy(), v2, rtol=1e-4)
    np.testing.assert_allclose(resumed.evaluation_vector(0, torch.zeros(6)).numpy(), v2, rtol=1e-4)


def test_ditto_authors_variant_evaluates_the_global_model() -> None:
    ditto = setup(build_method("ditto", dict(variant="authors")), 3)
    received = rows([1.0], [2.0], [6.0])
    out = ditto.aggregate(torch.zeros(1), received, star_info([10, 10, 10], [1, 1, 2]))
    assert out.item() == pytest.approx((1 + 2 + 12) / 4)
    assert ditto.evaluation_vector(1, out) is out


# ------------------------------------------------------------------------------ BALANCE
BALANCE_PEERS = rows([3, 5], [4, 4], [3, 5.3], [3, 6.6], [float("nan"), 0], [BIG, BIG])


@pytest.mark.parametrize(
    ("variant", "round", "expected", "selected"),
    [
        # own (3, 4), ||own|| = 5; peer distances 1, 1, 1.3, 2.6, NaN, 1.4e30; T = 4.
        # t = 0: limit 0.3 * 5 = 1.5 accepts three; 0.5 own + 0.5 mean (10/3, 14.3/3)
        ("paper", 0, [1.5 + 5 / 3, 2 + 14.3 / 6], [1, 2, 3]),
        # t = 1: limit 0.3 e^-0.25 5 = 1.17 accepts the two at distance 1
        ("paper", 1, [3.25, 4.25], [1, 2]),
        # authors: limit 0.3 e^-0.25 5 = 1.17, weights 0.5 and 0.5/3
        ("authors", 0, [1.5 + 7 / 6, 2 + 9 / 6], [1, 2]),
        # t = 2: limit 0.3 e^-0.5 5 = 0.91 < 1, nobody: own model (paper) / halved (authors)
        ("paper", 2, [3, 4], []),
        ("authors", 2, [1.5, 2], []),
    ],
)
def test_balance_by_hand(
    variant: str, round: int, expected: list[float], selected: list[int]
) -> None:
    balance = setup(build_method("balance", dict(variant=variant)), 6, rounds=4)
    result = balance.aggregate_client(
        PeerView(
            round, 0, torch.tensor([3.0, 4.0]), [1, 2, 3, 4, 5, 6], BALANCE_PEERS, no_evaluator()
        )
    )
    np.testing.assert_allclose(result.vector.numpy(), expected, rtol=1e-6)
    assert result.selected == selected
    assert result.scores[1] == pytest.approx(0.2) and result.scores[4] == pytest.approx(2.6 / 5)
    assert math.isinf(result.scores[5])


# ------------------------------------------------------------------------------- SCCLIP
SC_PEERS = rows([3, 4], [1, 0], [0, 2], [6, 8])


def test_scclip_remove_then_clip_by_hand() -> None:
    # own 0: distances 5, 1, 2, 10; b = 2 removes (6, 8) and (3, 4); tau^2 = (1 + 4)/2 = 2.5;
    # (0, 2) is clipped to (0, sqrt 2.5); x <- 0 + ((1, 0) + (0, 1.5811)) / 5
    scclip = setup(build_method("scclip", dict(b=2)), 5)
    result = scclip.aggregate_client(
        PeerView(0, 0, torch.zeros(2), [1, 2, 3, 4], SC_PEERS, no_evaluator())
    )
    np.testing.assert_allclose(result.vector.numpy(), [0.2, math.sqrt(2.5) / 5], rtol=1e-6)
    assert result.selected == [2, 3]
    assert result.scores == {1: 5.0, 2: 1.0, 3: 2.0, 4: 10.0}


def test_scclip_fixed_radius_clips_differences_around_the_own_model() -> None:
    own = torch.tensor([1.0, 1.0])
    result = setup(build_method("scclip", dict(b=0, tau=0.5)), 5).aggregate_client(
        PeerView(0, 0, own, [1, 2, 3, 4], SC_PEERS, no_evaluator())
    )
    diffs = SC_PEERS.double().numpy() - 1.0
    clipped = [d * min(1.0, 0.5 / np.linalg.norm(d)) for d in diffs]
    np.testing.assert_allclose(result.vector.numpy(), 1.0 + np.sum(clipped, axis=0) / 5, rtol=1e-6)


def test_scclip_authors_clips_whole_models_at_the_second_largest_distance() -> None:
    own = np.array([1.0, 1.0])
    peers = SC_PEERS.double().numpy()
    tau = sorted(np.linalg.norm(peers - own, axis=1))[-2]  # sqrt(13)
    assert tau == pytest.approx(math.sqrt(13))
    clipped = [p * min(1.0, tau / np.linalg.norm(p)) for p in peers]
    result = setup(build_method("scclip", dict(variant="authors")), 5).aggregate_client(
        PeerView(
            0, 0, torch.tensor(own, dtype=torch.float32), [1, 2, 3, 4], SC_PEERS, no_evaluator()
        )
    )
    np.testing.assert_allclose(
        result.vector.numpy(), (own + np.sum(clipped, axis=0)) / 5, rtol=1e-6
    )
    assert result.selected == [1, 2, 3, 4]


# ------------------------------------------------------------- garbage: NaN, Inf, enormous
GARBAGE = [[float("nan")] * 3, [float("inf"), 0.0, 1.0], [BIG, -BIG, BIG]]
BENIGN = [[1.0, 0.2, 0.1], [0.9, 0.1, 0.2], [1.1, 0.15, 0.12], [1.0, 0.25, 0.18]]


def star_garbage() -> tuple[torch.Tensor, torch.Tensor]:
    """Four benign models and three broken ones (NaN, Inf, 1e30)."""
    return rows(*BENIGN), rows(*BENIGN, *GARBAGE)


@pytest.mark.parametrize(
    "name, params",
    [
        ("krum", {}),
        ("krum", {"f": 3, "m": 3}),
        ("krum", {"variant": "authors"}),
        ("afa", {}),
        ("afa", {"variant": "authors"}),
        ("asmr", {}),
        ("asmr", {"variant": "authors"}),
    ],
)
def test_rejecting_star_methods_never_take_garbage(name: str, params: dict[str, Any]) -> None:
    benign, received = star_garbage()
    method = setup(build_method(name, params), 7)
    out = method.aggregate(torch.zeros(3), received, star_info([10] * 7))
    assert bool(torch.isfinite(out).all())
    low, high = benign.min(dim=0).values, benign.max(dim=0).values
    assert bool(((out >= low - 1e-6) & (out <= high + 1e-6)).all()), out  # inside the benign hull


def test_cfl_ignores_non_finite_models() -> None:
    benign, received = star_garbage()
    non_finite = received[:6]  # four benign, NaN, Inf
    cfl = setup(build_method("cfl", {}), 6)  # the benign mean update is large: no split
    out = cfl.aggregate(torch.zeros(3), non_finite, star_info([10] * 6))
    np.testing.assert_allclose(out.numpy(), benign.double().mean(dim=0).numpy(), rtol=1e-6)
    split = setup(build_method("cfl", dict(eps1=1e40, eps2=0.0)), 6)  # forced split
    split.aggregate(torch.zeros(3), non_finite, star_info([10] * 6))
    assert all(bool(torch.isfinite(m).all()) for m in split.models)
    assert sorted(k for c in split.clusters for k in c) == list(range(6))
    halves = split.splits[0]["halves"]
    larger = max(halves, key=len)
    assert {4, 5} <= set(larger)  # the absent models join the larger half
    authors = setup(build_method("cfl", dict(variant="authors")), 6)
    out = authors.aggregate(torch.zeros(3), non_finite, star_info([10] * 6))
    assert bool(torch.isfinite(out).all())


def test_cfl_survives_enormous_models() -> None:
    # CFL only splits near a stationary point; an enormous update keeps the mean update large,
    # so (as in the paper) it is averaged in: no crash, no NaN
    _, received = star_garbage()
    for method in (
        setup(build_method("cfl", {}), 7),
        setup(build_method("cfl", dict(eps1=1e40, eps2=0.0)), 7),
        setup(build_method("cfl", dict(variant="authors")), 7),
    ):
        out = method.aggregate(torch.zeros(3), received, star_info([10] * 7))
        assert not bool(torch.isnan(out).any())


def test_non_rejecting_star_methods_do_not_crash_on_garbage() -> None:
    _, received = star_garbage()
    for method in (setup(build_method("fedprox", {}), 7), setup(build_method("ditto", {}), 7)):
        out = method.aggregate(torch.zeros(3), received, star_info([10] * 7))
        assert out.shape == (3,)  # plain averaging: NaN in, NaN out, no exception


@pytest.mark.parametrize(
    ("method", "taken"),
    [
        (build_method("balance", {}), []),
        (build_method("balance", dict(variant="authors")), []),
        (build_method("scclip", dict(b=3)), []),
        (
            build_method("scclip", dict(variant="authors")),
            [6],
        ),  # the enormous model, rescaled to a small norm
    ],
    ids=["balance", "balance_authors", "scclip", "scclip_authors"],
)
def test_p2p_methods_never_take_garbage(method: Any, taken: list[int]) -> None:
    own = torch.tensor(BENIGN[0])
    received = rows(*BENIGN[1:], *GARBAGE)
    setup(method, 7, rounds=4)
    result = method.aggregate_client(
        PeerView(0, 0, own, [1, 2, 3, 4, 5, 6], received, no_evaluator())
    )
    assert bool(torch.isfinite(result.vector).all())
    assert sorted({4, 5, 6} & set(result.selected)) == taken
    assert bool((result.vector.abs() <= rows(*BENIGN).abs().max(dim=0).values + 1e-6).all())


def test_scclip_with_too_small_b_still_drops_non_finite_models() -> None:
    own = torch.tensor(BENIGN[0])
    received = rows(*BENIGN[1:], *GARBAGE[:2])
    result = setup(build_method("scclip", dict(b=1)), 6).aggregate_client(
        PeerView(0, 0, own, [1, 2, 3, 4, 5], received, no_evaluator())
    )
    assert bool(torch.isfinite(result.vector).all()) and result.selected == [1, 2, 3]


@pytest.mark.parametrize(
    "method",
    [build_method("fedprox", dict(mu=0.1)), build_method("ditto", dict(lam=0.5))],
    ids=["fedprox", "ditto"],
)
def test_local_training_against_a_non_finite_global_model_does_not_crash(method: Any) -> None:
    cfg = {"optimizer": "adam", "lr": 0.01, "batch_size": 2, "local_epochs": 1}
    model = linear_model()
    broken = torch.full((6,), float("nan"))
    ParamLayout.of(model).load(model, broken)  # the engine loads the (broken) global model
    setup(method, 1).train_client(linear_context(model, X, Y, broken, cfg), 0, 0)
