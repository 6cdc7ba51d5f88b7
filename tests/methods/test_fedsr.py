"""FedSR: the regularisers and the probabilistic head by hand, private priors in a real cell."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from helpers.builders import build_method
from helpers.specs import filled_spec
from torch import nn
from torch.nn import functional as F

from benchlib.data.split import SplitSpec, make_split, write_split
from benchlib.data.store import load_store, write_store
from benchlib.fl.engine import CellRun, run_cell
from benchlib.methods.fedsr import FedSR, fedsr_regularisers
from benchlib.models.tfl import FedSRNet


def softplus_inverse(y: float) -> float:
    return math.log(math.expm1(y))


def test_l2r_is_the_mean_unsquared_norm():
    z = torch.tensor([[3.0, 4.0], [0.0, 1.0]])
    zero = torch.zeros(1, 2)
    l2r, _ = fedsr_regularisers(
        z, zero.expand(2, 2), torch.ones(2, 2), torch.tensor([0, 0]), zero, torch.ones(1, 2),
        torch.tensor(1.0),
    )  # fmt: skip
    assert float(l2r) == pytest.approx((5.0 + 1.0) / 2)


def test_cmi_is_the_kl_to_the_class_prior_by_hand():
    mu = torch.tensor([[1.0, 0.0]])
    sigma = torch.tensor([[1.0, 0.5]])
    r_mu = torch.tensor([[0.0, 0.0], [0.5, -1.0]])
    r_sigma = torch.tensor([[1.0, 1.0], [softplus_inverse(2.0), softplus_inverse(1.0)]])
    _, cmi = fedsr_regularisers(mu, mu, sigma, torch.tensor([1]), r_mu, r_sigma, torch.tensor(2.0))
    # KL(N(m1, s1) || N(m2, s2)) = log(s2/s1) + (s1^2 + (m1 - m2)^2) / (2 s2^2) - 1/2, with
    # (m1, s1) = C (mu, sigma) = (2, 2) and (0, 1); prior of class 1: (0.5, 2) and (-1, 1)
    kl0 = math.log(2 / 2) + (4 + 1.5**2) / (2 * 4) - 0.5
    kl1 = math.log(1 / 1) + (1 + 1.0) / 2 - 0.5
    assert float(cmi) == pytest.approx(kl0 + kl1, rel=1e-5)
    # equal distributions: zero
    _, zero = fedsr_regularisers(
        mu, torch.zeros(1, 2), torch.full((1, 2), 2.0), torch.tensor([1]),
        torch.zeros(2, 2), torch.full((2, 2), softplus_inverse(2.0)), torch.tensor(1.0),
    )  # fmt: skip
    assert float(zero) == pytest.approx(0.0, abs=1e-6)


def test_head_samples_in_training_and_averages_20_draws_at_test():
    torch.manual_seed(0)
    backbone = nn.Linear(3, 4)  # z_dim 2: outputs (mu, pre-softplus sigma)
    net = FedSRNet(backbone, z_dim=2, num_classes=3, num_samples=20)
    x = torch.randn(5, 3)
    net.train()
    logits = net(x)
    assert logits.shape == (5, 3) and net.last is not None
    z, mu, sigma = net.last
    assert torch.allclose(logits, net.classifier(z))
    assert torch.allclose(mu, backbone(x)[:, :2])
    assert torch.allclose(sigma, F.softplus(backbone(x)[:, 2:]))
    net.eval()
    out = net(x)
    generator = torch.Generator().manual_seed(0)
    eps = torch.randn((20, 5, 2), generator=generator)
    h = backbone(x)
    draws = h[:, :2] + F.softplus(h[:, 2:]) * eps
    expected = F.softmax(net.classifier(draws), dim=-1).mean(dim=0).log()
    assert torch.allclose(out, expected, atol=1e-6)
    assert torch.equal(net(x), out)  # deterministic at test time


def test_method_wraps_the_model_and_keeps_the_prior_private():
    method = build_method("fedsr", {"z_dim": 4, "cmi": 1e-3})
    assert isinstance(method, FedSR) and method.private_prefixes == ("fedsr_prior.",)
    model = method.build_model(lambda n: nn.Linear(6, n), 3)
    assert isinstance(model, FedSRNet) and model.backbone.out_features == 8
    assert model.classifier.out_features == 3


def classification_store(out):
    """Tabular 3-class rows, one group per client."""
    rng = np.random.default_rng(0)
    n = 96
    x = rng.normal(size=(n, 5)).astype(np.float32)
    labels = (x[:, 0] > 0).astype(int) + (x[:, 1] > 0.5).astype(int)
    index = pd.DataFrame(
        {
            "sample_id": [f"r{i:03d}" for i in range(n)],
            "label": labels,
            "group": [f"g{i % 4}" for i in range(n)],
            "source_split": "",
        }
    )
    write_store(out / "store", dataset="rows", index=index, features=x, num_classes=3,
                sources=[], task="classification")  # fmt: skip
    spec = SplitSpec(4, "groups", {}, 0.2, 0.2, seed=0)
    write_split(make_split(load_store(out / "store"), spec), out / "split.csv")
    return out / "store", out / "split.csv"


def test_fedsr_cell_keeps_priors_local_and_scores_the_held_out_client(tmp_path):
    store, split = classification_store(tmp_path)
    spec = {
        "experiment": "rows", "dataset": "rows", "method_id": "fedsr", "method": "fedsr",
        "method_params": {"z_dim": 4, "cmi": 0.1}, "malfunction": "none", "k": 0, "seed": 0,
        "clients": 4, "task": "classification", "model": {"name": "mlp", "params": {"hidden": [8]}},
        "training": {"optimizer": "sgd", "lr": 0.1, "batch_size": 8, "local_epochs": 1,
                     "rounds": 2},
        "malfunction_params": {"placement": "first"}, "held_out": [3],
    }  # fmt: skip
    cell = CellRun(filled_spec(spec), store, split)
    assert not any(name.startswith("fedsr_prior.") for name in cell.layout.names)
    start = [m.fedsr_prior.r_mu.detach().clone() for m in cell.models]
    for r in range(2):
        cell.run_round(r)
    trained = [m.fedsr_prior.r_mu.detach() for m in cell.models]
    assert not torch.equal(trained[0], trained[1])  # each client learns its own prior
    assert all(not torch.equal(trained[c], start[c]) for c in range(3))
    assert torch.equal(trained[3], start[3])  # the held-out client never trains
    metrics = run_cell(filled_spec(spec), store, split, tmp_path / "m.json", tmp_path / "ck")
    assert [c["client"] for c in metrics["held_out_clients"]] == [3]
    assert 0.0 <= metrics["held_out_clients"][0]["test_accuracy"] <= 1.0


def test_classification_uses_the_configured_task_loss():
    """FedSR's data term is the cell's task loss (e.g. a focal loss), not cross entropy always
    (before: F.cross_entropy for every classification cell)."""
    method = build_method("fedsr", {"z_dim": 2, "l2r": 0.0, "cmi": 0.0})
    model = method.build_model(lambda n: nn.Linear(3, n), 2)
    calls = []

    def task_loss(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        calls.append(len(labels))
        return outputs.sum() * 0 + 7.0

    class Context:
        def __init__(self) -> None:
            self.models = {0: model}
            self.loss_fn = task_loss

        def train(self, client: int, loss_fn) -> None:
            self.used = loss_fn

    context = Context()
    method.train_client(context, 0, 0)
    model.train()
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 0, 1])
    value = context.used(model(x), y)
    assert calls == [4] and float(value) == pytest.approx(7.0)  # l2r = cmi = 0: the task loss
