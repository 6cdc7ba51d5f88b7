"""Pretrained weights without the network: a locally saved state dict named the torch.hub way
(``name-<sha256 prefix>.pth``) is loaded into EfficientNet-B0 and DenseNet-121 (all but the new
classifier), a file that does not match its name's hash or is missing stops with one clear error,
and the fetch step downloads from 127.0.0.1 with the hash check."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from helpers.builders import build_model
from helpers.http_server import serve_directory

from benchlib.models.pretrained import fetch_weights
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.weights import WEIGHTS_URLS, weights_path


def save_hub_file(state: dict, folder: Path, stem: str) -> Path:
    """Save ``state`` as torch.hub names files: ``<stem>-<first 8 hex of its sha256>.pth``."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / "tmp.pth"
    torch.save(state, tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    path = folder / f"{stem}-{digest[:8]}.pth"
    tmp.rename(path)
    return path


@pytest.fixture(autouse=True)
def _workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # results/weights/ is relative to the workflow's directory
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def test_weights_paths_follow_torchvision_file_names():
    assert weights_path("densenet121", {}) == "results/weights/densenet121-a639ec97.pth"
    assert weights_path("efficientnet_b0", {}).endswith("efficientnet_b0_rwightman-7f5810bc.pth")
    assert weights_path("resnet18", {}) == "results/weights/resnet18-f37072fd.pth"
    assert weights_path("resnet50", {}) == "results/weights/resnet50-0676ba61.pth"
    assert set(WEIGHTS_URLS) == {"densenet121", "efficientnet_b0", "resnet18", "resnet50"}
    with pytest.raises(BenchlibError, match="carries no sha256 prefix"):
        weights_path("densenet121", {"weights_url": "http://127.0.0.1:9/densenet.pth"})


def test_efficientnet_b0_loads_a_saved_state_dict_except_the_head(tmp_path):
    from torchvision.models import efficientnet_b0

    torch.manual_seed(1)
    imagenet = efficientnet_b0(weights=None)  # 1000 ImageNet classes
    path = save_hub_file(imagenet.state_dict(), tmp_path / "results/weights", "effb0")
    params = {"pretrained": True, "weights_url": f"http://127.0.0.1:9/{path.name}"}
    torch.manual_seed(2)
    model = build_model("efficientnet_b0", 8, (3, 32, 32), params)
    mine, theirs = model.state_dict(), imagenet.state_dict()
    for key, value in theirs.items():
        if key.startswith("classifier.1."):
            assert mine[key].shape[0] == 8  # a new head for 8 classes
        else:
            assert torch.equal(mine[key], value), key
    assert model(torch.zeros(2, 3, 32, 32)).shape == (2, 8)


@pytest.mark.parametrize("name", ["resnet18", "resnet50"])
def test_resnets_load_imagenet_weights_except_fc(tmp_path, name):
    from torchvision import models

    torch.manual_seed(1)
    imagenet = getattr(models, name)(weights=None)
    path = save_hub_file(imagenet.state_dict(), tmp_path / "results/weights", name)
    params = {"pretrained": True, "weights_url": f"http://127.0.0.1:9/{path.name}"}
    torch.manual_seed(2)
    model = build_model(name, 7, (3, 64, 64), params)
    mine = model.state_dict()
    for key, value in imagenet.state_dict().items():
        if key.startswith("fc."):
            assert mine[key].shape[0] == 7  # PACS: a new head for 7 classes
        else:
            assert torch.equal(mine[key], value), key
    with pytest.raises(BenchlibError, match="3 input channels"):
        build_model(name, 7, (1, 64, 64), params)


def test_densenet121_reads_torchvisions_old_key_names(tmp_path):
    from torchvision.models import densenet121

    torch.manual_seed(3)
    imagenet = densenet121(weights=None)
    # torchvision's published DenseNet file spells "norm1" as "norm.1" (pre-1.0 layer names)
    old = {
        key.replace(".norm1.", ".norm.1.").replace(".conv2.", ".conv.2."): value
        for key, value in imagenet.state_dict().items()
    }
    assert any(".norm.1." in key for key in old)
    path = save_hub_file(old, tmp_path / "results/weights", "densenet121")
    params = {"pretrained": True, "weights_url": f"http://127.0.0.1:9/{path.name}"}
    model = build_model("densenet121", 2, (3, 96, 96), params)
    key = "features.denseblock1.denselayer1.norm1.weight"
    assert torch.equal(model.state_dict()[key], imagenet.state_dict()[key])
    assert model.classifier.out_features == 2


def test_a_damaged_or_missing_file_is_one_clear_error(tmp_path):
    folder = tmp_path / "results/weights"
    folder.mkdir(parents=True)
    torch.save({"w": torch.ones(1)}, folder / "effb0-00000000.pth")
    params = {"pretrained": True, "weights_url": "http://127.0.0.1:9/effb0-00000000.pth"}
    with pytest.raises(BenchlibError, match=r"not the 00000000 its name says.*fetch it again"):
        build_model("efficientnet_b0", 8, (3, 32, 32), params)
    params["weights_url"] = "http://127.0.0.1:9/effb0-11111111.pth"
    with pytest.raises(BenchlibError, match=r"are missing; fetch them on a host with network"):
        build_model("efficientnet_b0", 8, (3, 32, 32), params)
    path = save_hub_file({"w": torch.ones(1)}, folder, "other")
    params["weights_url"] = f"http://127.0.0.1:9/{path.name}"
    with pytest.raises(BenchlibError, match="another architecture"):
        build_model("efficientnet_b0", 8, (3, 32, 32), params)


def test_fetch_checks_the_hash_prefix_over_loopback(tmp_path):
    www = tmp_path / "www"
    good = save_hub_file({"w": torch.arange(3.0)}, www, "tiny")
    (www / "bad-0123abcd.pth").write_bytes(good.read_bytes())
    with serve_directory(www) as (url, requests):
        out = fetch_weights(f"{url}/{good.name}", tmp_path / "results/weights" / good.name)
        assert out.read_bytes() == good.read_bytes()
        with pytest.raises(BenchlibError, match="does not match the sha256 prefix"):
            fetch_weights(f"{url}/bad-0123abcd.pth", tmp_path / "results/weights/bad-0123abcd.pth")
    assert not (tmp_path / "results/weights/bad-0123abcd.pth").exists()
    assert [p.name for p in (tmp_path / "results/weights").iterdir()] == [good.name]
    assert requests == [f"/{good.name}", "/bad-0123abcd.pth"]
