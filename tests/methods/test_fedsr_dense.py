"""FedSR per pixel (TFL Table 3 on FeTS): the regularisers on a 1 x 2 x 2 toy by hand, the
averaged test-time softmax against a manual draw loop, the head on the real U-Net, the choice of
head, and a real two-round Snakemake run on a FeTS-format folder of .nii.gz volumes."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
import yaml
from conftest import ops_snakemake
from helpers.builders import build_method, build_model
from helpers.fets_folder import tiny_config, write_fets
from torch import nn
from torch.nn import functional as F

from benchlib.methods.fedsr import DENSE_Z_DIM, fedsr_regularisers
from benchlib.models.tfl import FedSRNet, FedSRSegNet
from benchlib.primitives.errors import BenchlibError
from benchlib.tasks import get_task
from benchlib.tasks.segmentation import dice_ce


def softplus_inverse(y: float) -> float:
    return math.log(math.expm1(y))


def pixel_map(vectors: list[tuple[float, float]]) -> torch.Tensor:
    """[1, 2, 2, 2] (N, z, H, W) from the z vectors of pixels (0,0), (0,1), (1,0), (1,1)."""
    return torch.tensor(vectors).T.reshape(1, 2, 2, 2)


# ----------------------------------------------------------------------- the regularisers
def test_per_pixel_regularisers_by_hand():
    z = pixel_map([(3.0, 4.0), (0.0, 1.0), (6.0, 8.0), (0.0, 0.0)])  # norms 5, 1, 10, 0
    mu = pixel_map([(1.0, 0.0), (1.0, -1.0), (0.0, 0.0), (0.0, 0.0)])
    sigma = pixel_map([(1.0, 2.0), (2.0, 1.0), (1.0, 1.0), (1.0, 1.0)])
    labels = torch.tensor([[[0, 1], [1, 0]]])
    r_mu = torch.tensor([[0.0, 0.0], [1.0, -1.0]])
    one, two = softplus_inverse(1.0), softplus_inverse(2.0)
    r_sigma = torch.tensor([[one, one], [two, one]])  # softplus: [[1, 1], [2, 1]]
    l2r, cmi = fedsr_regularisers(z, mu, sigma, labels, r_mu, r_sigma, torch.tensor(1.0))
    assert float(l2r) == pytest.approx((5 + 1 + 10 + 0) / 4)
    # KL(N(m1, s1) || N(m2, s2)) = log(s2 / s1) + (s1^2 + (m1 - m2)^2) / (2 s2^2) - 1/2 per dim:
    # (0,0) class 0: 0.5 + (log(1/2) + 4/2 - 0.5); (0,1) equals its class-1 prior: 0;
    # (1,0) class 1: (log 2 + 2/8 - 0.5) + 0.5; (1,1) equals its class-0 prior: 0
    kl = [0.5 + math.log(0.5) + 1.5, 0.0, math.log(2.0) - 0.25 + 0.5, 0.0]
    assert float(cmi) == pytest.approx(sum(kl) / 4, rel=1e-6)
    assert float(cmi) == pytest.approx(0.5625, rel=1e-6)  # the logs cancel


def test_per_pixel_regularisers_are_the_per_sample_ones_averaged_over_pixels():
    generator = torch.Generator().manual_seed(3)
    z = torch.randn(2, 3, 4, 5, generator=generator)
    mu = torch.randn(2, 3, 4, 5, generator=generator)
    sigma = torch.rand(2, 3, 4, 5, generator=generator) + 0.1
    labels = torch.randint(0, 4, (2, 4, 5), generator=generator)
    r_mu = torch.randn(4, 3, generator=generator)
    r_sigma = torch.randn(4, 3, generator=generator)
    scale = torch.tensor(1.5)
    l2r, cmi = fedsr_regularisers(z, mu, sigma, labels, r_mu, r_sigma, scale)
    pixels = [(n, i, j) for n in range(2) for i in range(4) for j in range(5)]
    per_pixel = [
        fedsr_regularisers(
            z[n, :, i, j][None], mu[n, :, i, j][None], sigma[n, :, i, j][None],
            labels[n, i, j][None], r_mu, r_sigma, scale,
        )
        for n, i, j in pixels
    ]  # fmt: skip
    assert float(l2r) == pytest.approx(float(np.mean([float(a) for a, _ in per_pixel])), rel=1e-6)
    assert float(cmi) == pytest.approx(float(np.mean([float(b) for _, b in per_pixel])), rel=1e-6)


# ------------------------------------------------------------------------------- the head
def test_head_draws_per_pixel_in_training_and_averages_the_draws_at_test():
    torch.manual_seed(0)
    backbone = nn.Conv2d(3, 4, kernel_size=1)  # z_dim 2: channels (mu, pre-softplus sigma)
    net = FedSRSegNet(backbone, z_dim=2, num_classes=3, num_samples=5)
    x = torch.randn(2, 3, 4, 5)
    h = backbone(x)
    mu, sigma = h[:, :2], F.softplus(h[:, 2:])
    weight, bias = net.classifier.weight[:, :, 0, 0], net.classifier.bias

    def classify(z: torch.Tensor) -> torch.Tensor:  # the 1x1 convolution written out
        return torch.einsum("nzhw,cz->nchw", z, weight) + bias[None, :, None, None]

    net.train()
    logits = net(x)
    assert logits.shape == (2, 3, 4, 5) and net.last is not None
    z, kept_mu, kept_sigma = net.last
    assert torch.allclose(kept_mu, mu) and torch.allclose(kept_sigma, sigma)
    assert torch.allclose(logits, classify(z), atol=1e-6)
    net.eval()
    out = net(x)
    generator = torch.Generator().manual_seed(0)
    draws = [F.softmax(classify(mu + sigma * torch.randn(mu.shape, generator=generator)), dim=1)
             for _ in range(5)]  # fmt: skip
    expected = torch.stack(draws).mean(dim=0)
    assert torch.allclose(out.exp(), expected, atol=1e-6)
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(2, 4, 5), atol=1e-6)
    assert not torch.allclose(out.exp(), draws[0], atol=1e-3)  # not a single draw
    assert torch.equal(net(x), out)  # deterministic at test time


def unet_builder(size: int = 32):
    params = {"features": [4, 4, 8, 8, 16, 4]}
    return lambda outputs: build_model("unet", outputs, (4, size, size), params)


def test_dense_head_on_the_real_unet_trains_with_the_task_loss():
    torch.manual_seed(0)
    method = build_method("fedsr", dict(dense=True, cmi=0.5))
    model = method.build_model(unet_builder(), 4)
    assert isinstance(model, FedSRSegNet) and model.z_dim == DENSE_Z_DIM == 64
    assert model.backbone.final_conv.out_channels == 2 * 64
    assert model.classifier.weight.shape == (4, 64, 1, 1)
    assert {n for n, _ in model.named_parameters() if n.startswith(method.private_prefixes)} == {
        "fedsr_prior.r_mu", "fedsr_prior.r_sigma", "fedsr_prior.C"}  # fmt: skip
    x = torch.rand(2, 4, 32, 32)
    masks = torch.zeros(2, 32, 32, dtype=torch.long)
    masks[:, 8:16, 8:16] = 2
    model.train()
    logits = model(x)
    assert logits.shape == (2, 4, 32, 32) and model.last is not None
    assert [tuple(t.shape) for t in model.last] == [(2, 64, 32, 32)] * 3
    task_loss = dice_ce()
    total = method.loss_fn(model, task_loss)(logits, masks)
    z, mu, sigma = model.last
    prior = model.fedsr_prior
    l2r, cmi = fedsr_regularisers(z, mu, sigma, masks, prior.r_mu, prior.r_sigma, prior.C)
    expected = task_loss(logits, masks) + 1e-2 * l2r + 0.5 * cmi
    assert float(total.detach()) == pytest.approx(float(expected.detach()), rel=1e-6)
    total.backward()
    grad = prior.r_mu.grad
    assert grad is not None and grad[[0, 2]].abs().sum() > 0  # classes present in the masks
    assert torch.equal(grad[[1, 3]], torch.zeros(2, 64))  # absent classes: no pull
    model.eval()
    out = model(x)
    assert out.shape == (2, 4, 32, 32) and bool(torch.isfinite(out).all())
    assert torch.allclose(out.exp().sum(dim=1), torch.ones(2, 32, 32), atol=1e-5)


def test_the_head_follows_dense_or_the_task():
    build = unet_builder()
    segmentation, classification = get_task("segmentation"), get_task("classification")
    assert isinstance(build_method("fedsr", dict(dense=True)).build_model(build, 4), FedSRSegNet)
    assert isinstance(
        build_method("fedsr", {}).build_model(build, 4, task=segmentation), FedSRSegNet
    )
    dense = build_method("fedsr", dict(z_dim=8)).build_model(build, 4, task=segmentation)
    assert isinstance(dense, FedSRSegNet) and dense.z_dim == 8
    linear = build_method("fedsr", {}).build_model(
        lambda n: nn.Linear(6, n), 3, task=classification
    )
    assert isinstance(linear, FedSRNet) and linear.backbone.out_features == 2 * 512
    assert isinstance(build_method("fedsr", {}).build_model(lambda n: nn.Linear(6, n), 3), FedSRNet)
    # the per-sample head on a segmentation model names the fix
    per_sample = build_method("fedsr", dict(z_dim=4, dense=False)).build_model(
        build, 4, task=segmentation
    )
    with pytest.raises(BenchlibError, match="set the method's parameter dense: true"):
        per_sample(torch.zeros(1, 4, 32, 32))
    with pytest.raises(BenchlibError, match=r"must output \[N, 8, H, W\] maps"):
        build_method("fedsr", dict(z_dim=4, dense=True)).build_model(lambda n: nn.Linear(6, n), 3)(
            torch.zeros(2, 6)
        )


# -------------------------------------------------------------------------- whole chain
def dense_config(root) -> dict:
    """The FeTS chain of test_fets with FedSR per pixel, as the paper config would name it."""
    config = copy.deepcopy(tiny_config(root))
    config["methods"] = {
        "fedsr_dense": {"method": "fedsr", "label": "FedSR",
                        "params": {"dense": True, "z_dim": 16, "cmi": 0.001}},
    }  # fmt: skip
    config["experiments"]["fets"]["methods"] = ["fedsr_dense"]
    # the held-out client scored on its test rows, whose class maps the cell saves
    config["datasets"]["fets"]["training"]["held_out_rows"] = "test"
    config["reports"] = {
        "fets_table": {"kind": "tfl_table", "metric": "dice", "methods": ["fedsr_dense"],
                       "rows": [{"label": "OOF", "experiment": "fets", "scope": "oof"}],
                       "quoted": {"OOF": {"fedsr_dense": 72.85}}},
    }  # fmt: skip
    return config


@pytest.mark.workflow
def test_two_round_fedsr_cell_on_fets_scores_dice(tmp_path):
    from benchlib.data.store import load_store
    from benchlib.facts.saved_predictions import decode_array
    from benchlib.report.kinds.tfl.segmentation_examples import dice

    root = tmp_path / "MICCAI_FeTS2022_TrainingData"
    write_fets(root)
    config = tmp_path / "fets.yaml"
    config.write_text(yaml.safe_dump(dense_config(root)))
    result = ops_snakemake(tmp_path, config, "-c1", "tables/fets_table.tex")
    assert result.returncode == 0, result.stderr[-3000:]
    path = tmp_path / "results/runs/fets/none/fedsr_dense/k0/seed0/metrics.json"
    metrics = json.loads(path.read_text())
    scored = metrics["clients"] + metrics["held_out_clients"]
    assert sorted(c["client"] for c in scored) == [0, 1, 2, 3]
    for client in scored:
        assert math.isfinite(client["test_dice"]) and 0.0 <= client["test_dice"] <= 1.0
    # the saved class maps (arg-max of the averaged softmax) give the Dice the engine scored
    data = load_store(tmp_path / "results/data/fets")
    held = metrics["predictions"]["clients"]["3"]
    ours = np.mean([dice(p, data.arrays["masks"][r], 4) for p, r in
                    zip(decode_array(held["masks"]), held["rows"], strict=True)])  # fmt: skip
    oof = metrics["held_out_clients"][0]["test_dice"]
    assert oof == pytest.approx(ours)
    text = (tmp_path / "tables/fets_table.tex").read_text()
    assert f"OOF & {100 * oof:.1f} \\\\" in text and "OOF & 72.85" in text
