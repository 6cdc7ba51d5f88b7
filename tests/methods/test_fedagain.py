"""FedAgain (paper Algorithm 2): trust weights by hand, and the benchmark error in a real cell."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from helpers.builders import build_method
from helpers.specs import filled_spec

from benchlib.fl.engine import CellRun
from benchlib.methods.base import StarRound
from benchlib.methods.fedagain import FedAgain, trust_weights
from benchlib.models.vectors import ParamLayout


def _info(errors, participants=None):
    n = len(errors)
    return StarRound(
        round=0,
        num_rounds=1,
        train_sizes=torch.ones(n, dtype=torch.float64),
        batch_counts=torch.ones(n, dtype=torch.float64),
        participants=participants or list(range(n)),
        reports=[{"benchmark_error": e} for e in errors],
    )


def test_paper_example_trust_ratio():
    # Sec. 3.4: E = 0.25, D = 0.8 vs E = 0.5, D = 0.6, eps = 1e-3 -> T = 1/0.201 and 1/0.301
    trust, weights = trust_weights(
        torch.tensor([0.25, 0.5], dtype=torch.float64),
        torch.tensor([0.8, 0.6], dtype=torch.float64),
        eps=1e-3,
    )
    assert trust.tolist() == pytest.approx([1 / 0.201, 1 / 0.301], rel=1e-12)
    assert float(trust[0] / trust[1]) == pytest.approx(0.301 / 0.201, rel=1e-12)  # ~1.5
    assert weights.tolist() == pytest.approx([0.301 / 0.502, 0.201 / 0.502], rel=1e-12)


def test_aggregate_by_hand_with_a_broken_client():
    method = build_method("fedagain", {})
    method.setup(3, 1, 0)
    global_vector = torch.zeros(2)
    # D = 5, 1, inf; E = 0.1, 1.0, 0.2 -> T = 1000/501, 1000/1001, 0
    received = torch.tensor([[3.0, 4.0], [0.0, 1.0], [float("nan"), 1.0]])
    new = method.aggregate(global_vector, received, _info([0.1, 1.0, 0.2], [2, 5, 7]))
    # w = (1001, 501, 0) / 1502
    assert new.tolist() == pytest.approx([3003 / 1502, 4505 / 1502], rel=1e-6)
    log = method.summary()["trust"][0]
    assert log["clients"] == [2, 5, 7]
    assert log["D"][:2] == pytest.approx([5.0, 1.0]) and log["D"][2] is None
    assert log["E"] == pytest.approx([0.1, 1.0, 0.2])
    assert log["T"] == pytest.approx([1000 / 501, 1000 / 1001, 0.0], rel=1e-12)
    assert log["w"] == pytest.approx([1001 / 1502, 501 / 1502, 0.0], rel=1e-12)
    restored = build_method("fedagain", {})
    restored.load_state_dict(method.state_dict())
    assert restored.summary() == method.summary()


def test_no_trusted_client_keeps_the_global_model():
    method = build_method("fedagain", {})
    method.setup(2, 1, 0)
    global_vector = torch.tensor([1.0, 2.0])
    received = torch.tensor([[float("inf"), 0.0], [5.0, 5.0]])
    new = method.aggregate(global_vector, received, _info([0.3, float("nan")]))
    assert torch.equal(new, global_vector)


def test_eps_and_subset_are_checked():
    with pytest.raises(Exception, match="eps"):
        build_method("fedagain", {"eps": 0})
    with pytest.raises(Exception, match="benchmark_subset"):
        build_method("fedagain", {"benchmark_subset": "test"})


def test_benchmark_error_and_divergence_in_a_real_cell(mnist_store, smoke_split, smoke_cell_spec):
    spec = dict(smoke_cell_spec("fedavg", "none", 0))
    spec.update(method="fedagain", method_id="fedagain", method_params={})
    cell = CellRun(filled_spec(spec), mnist_store, smoke_split)
    start = cell.global_vector.clone()
    cell.run_round(0)
    log = cell.method.summary()["trust"][0]
    assert log["clients"] == [0, 1, 2, 3]
    trained = [cell.layout.flatten(cell.models[c]) for c in range(4)]
    for c in range(4):
        rows = cell.clients[c].rows["val"]
        expected = F.cross_entropy(
            cell.scoring.outputs(start, rows, c), cell.source.targets_of(rows)
        )
        assert log["E"][c] == pytest.approx(float(expected), rel=1e-5)
        d = float(torch.linalg.vector_norm(trained[c].double() - start.double()))
        assert log["D"][c] == pytest.approx(d, rel=1e-9)
        assert log["T"][c] == pytest.approx(1 / (log["E"][c] * d + 1e-3), rel=1e-9)
    assert math.fsum(log["w"]) == pytest.approx(1.0)
    mixed = sum(w * v.double() for w, v in zip(log["w"], trained, strict=True))
    assert torch.allclose(cell.global_vector.double(), mixed, atol=1e-6)
    assert cell.metrics()["method_summary"]["trust"][0] == log
    # the engine's layout gives the parameter entries (this CNN has no float buffers)
    assert cell.method.mask is not None and bool(cell.method.mask.all())
    assert torch.equal(cell.method.mask, cell.layout.parameter_mask(cell.models[0]))


# ------------------------------------------------------- D_k over parameters only (issue 24.1)
def _bn_model() -> torch.nn.Module:
    # state entries in vector order: 0.weight (4), 0.bias (2), 1.weight (2), 1.bias (2),
    # 1.running_mean (2), 1.running_var (2), 2.weight (2), 2.bias (1); num_batches_tracked is
    # an integer buffer, never transmitted
    return torch.nn.Sequential(
        torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2), torch.nn.Linear(2, 1)
    )


BUFFERS = slice(10, 14)  # running_mean and running_var of the BatchNorm layer


class _Training:
    """The part of a TrainingContext FedAgain's client report reads, on a real layout."""

    def __init__(self, model: torch.nn.Module, errors: list[float]) -> None:
        self.layout = ParamLayout.of(model)
        self.models = [model] * len(errors)
        self.global_vector = torch.zeros(self.layout.size)
        self.errors = errors

    def evaluate_loss(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        return self.errors[client]


def test_parameter_mask_leaves_out_batchnorm_buffers():
    layout = ParamLayout.of(_bn_model())
    assert layout.size == 17
    mask = layout.parameter_mask(_bn_model())
    assert mask.tolist() == [True] * 10 + [False] * 4 + [True] * 3


def _fedagain_round(received: torch.Tensor) -> tuple[FedAgain, torch.Tensor]:
    training = _Training(_bn_model(), [0.1, 1.0])
    method = build_method("fedagain", {})
    method.setup(2, 1, 0)
    reports = [method.client_report(training, c, 0) for c in range(2)]
    info = StarRound(
        round=0,
        num_rounds=1,
        train_sizes=torch.ones(2, dtype=torch.float64),
        batch_counts=torch.ones(2, dtype=torch.float64),
        participants=[0, 1],
        reports=reports,
    )
    return method, method.aggregate(training.global_vector, received, info)


def test_divergence_ignores_batchnorm_statistics():
    received = torch.zeros(2, 17)
    received[0, 0], received[0, 14] = 3.0, 4.0  # parameters moved by 5
    received[1, 1] = 1.0  # parameters moved by 1
    received[0, BUFFERS] = 100.0  # BatchNorm statistics drifted far (would give D = 200.06)
    method, new = _fedagain_round(received)
    log = method.summary()["trust"][0]
    # D = 5, 1; E = 0.1, 1.0 -> T = 1000/501, 1000/1001 -> w = (1001, 501) / 1502
    assert log["D"] == pytest.approx([5.0, 1.0], rel=1e-12)
    assert log["T"] == pytest.approx([1000 / 501, 1000 / 1001], rel=1e-12)
    assert log["w"] == pytest.approx([1001 / 1502, 501 / 1502], rel=1e-12)
    # the buffers are still aggregated with the trust weights
    assert new[BUFFERS].tolist() == pytest.approx([100.0 * 1001 / 1502] * 4, rel=1e-6)
    # changing only BatchNorm buffers of the received vectors leaves the trust weights unchanged
    changed = received.clone()
    changed[0, BUFFERS] = 0.0
    changed[1, BUFFERS] = torch.tensor([-7.0, 3.0, 50.0, 0.25])
    again, _ = _fedagain_round(changed)
    assert again.summary()["trust"][0]["w"] == log["w"]
    assert again.summary()["trust"][0]["D"] == log["D"]


def test_non_finite_batchnorm_statistics_still_mean_no_trust():
    received = torch.zeros(2, 17)
    received[0, 0], received[1, 1] = 3.0, 1.0
    received[1, 11] = float("nan")  # a broken model, even if only in its buffers
    method, new = _fedagain_round(received)
    log = method.summary()["trust"][0]
    assert log["D"][0] == pytest.approx(3.0) and log["D"][1] is None
    assert log["w"] == [1.0, 0.0]
    assert bool(torch.isfinite(new).all())
