"""TransUNet for 64x64 inputs: output shapes, the documented parameter count, the skips in use."""

from __future__ import annotations

import pytest
import torch
from helpers.builders import build_model

from benchlib.models.catalog import MODELS
from benchlib.models.transunet import TransUNet
from benchlib.primitives.errors import BenchlibError

TINY = {
    "resnet_layers": [1, 1, 1],
    "resnet_channels": [32, 64, 128],
    "stem_channels": 16,
    "norm_groups": 8,
    "hidden_size": 64,
    "depth": 2,
    "heads": 4,
    "mlp_dim": 128,
    "decoder_channels": [32, 16, 8, 8],
    "head_channels": 64,
}


def count(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize(("shape", "classes"), [((1, 64, 64), 2), ((3, 32, 48), 4)])
def test_output_shape(shape, classes):
    torch.manual_seed(0)
    model = build_model("transunet", classes, shape, TINY)
    out = model(torch.randn(3, *shape))
    assert out.shape == (3, classes, *shape[1:])
    assert model.grid == (shape[1] // 16, shape[2] // 16)


def test_default_is_r50_vit_b16_with_the_documented_parameter_count():
    model = TransUNet(1, 2, (64, 64), **MODELS.get("transunet").params.defaults())
    assert count(model) == 105_132_994  # the number in the module docstring and docs
    h, mlp = 768, 3072
    # one pre-norm ViT block by hand: qkv + proj (with bias), two MLP layers, two LayerNorms
    per_block = (3 * h * h + 3 * h) + (h * h + h) + (h * mlp + mlp) + (mlp * h + h) + 2 * 2 * h
    assert len(model.blocks) == 12 and count(model.blocks) == 12 * per_block
    assert [len(stage.blocks) for stage in model.resnet.stages] == [3, 4, 9]
    assert model.position.shape == (1, 16, 768)  # 4x4 tokens for 64x64 inputs
    model.eval()
    with torch.no_grad():
        assert model(torch.zeros(1, 1, 64, 64)).shape == (1, 2, 64, 64)


def test_every_part_gets_gradients_and_a_step_fits_a_batch():
    torch.manual_seed(0)
    model = build_model("transunet", 2, (1, 64, 64), {**TINY, "dropout": 0.0})
    images = torch.zeros(4, 1, 64, 64)
    masks = torch.zeros(4, 64, 64, dtype=torch.long)
    for i in range(4):
        images[i, 0, 8 + 4 * i : 40 + 4 * i, 16:48] = 1.0
        masks[i, 8 + 4 * i : 40 + 4 * i, 16:48] = 1
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(15):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(images), masks)
        loss.backward()
        losses.append(loss.item())
        optimizer.step()
    grads = {
        name: param.grad.abs().sum().item()
        for name, param in model.named_parameters()
        if param.grad is not None
    }
    for part in ("resnet.stem", "resnet.stages.0", "blocks.1", "position", "decoder.2", "head"):
        assert sum(v for k, v in grads.items() if k.startswith(part)) > 0, part
    assert losses[-1] < 0.5 * losses[0]


def test_bad_sizes_are_refused():
    with pytest.raises(BenchlibError, match="multiples of 16"):
        build_model("transunet", 2, (1, 60, 64), TINY)


@pytest.mark.slow
def test_tiny_transunet_lightyear_cell_under_sfa(tmp_path):
    """A whole cell: TransUNet trains in the engine, Dice is reported, and LIGHTYEAR never selects
    the sign-flipped sender (its flipped BatchNorm variances make its outputs NaN)."""
    from helpers.task_stores import groups_split, segmentation_store, task_cell_spec

    from benchlib.fl.engine import run_cell

    store = segmentation_store(tmp_path / "store", n=40, size=32)
    split = groups_split(store, tmp_path / "split.csv")
    spec = task_cell_spec(
        "segmentation", "lightyear", malfunction="sfa", k=1,
        model={"name": "transunet", "params": TINY},
    )  # fmt: skip
    metrics = run_cell(spec, store, split, tmp_path / "m.json", tmp_path / "ck")
    assert metrics["malicious_clients"] == [0]
    assert all(0.0 <= c["test_dice"] <= 1.0 for c in metrics["clients"])
    for selections in metrics["history"]["selections"]:
        for client in (1, 2, 3):
            assert 0 not in selections[client]
            assert sorted(set(selections[client]) - {0}) == [c for c in (1, 2, 3) if c != client]
