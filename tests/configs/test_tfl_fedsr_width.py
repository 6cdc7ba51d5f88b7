"""FedSR's z_dim in the TFL paper config follows the project's rule: the width of the feature the
classifier head reads (methods/fedsr.py), for every experiment that runs FedSR."""

from __future__ import annotations

from benchlib.configuration.config import Config
from benchlib.grid.paper_configs import load_paper_config

# the width of the feature a head reads, per backbone (torchvision ResNets' pooled features)
POOLED = {"resnet18": 512, "resnet50": 2048}
DENSE_DEFAULT = 64  # z per pixel: the U-Net's last decoder level (fedsr's default when dense)


def head_width(model: dict) -> int:
    if model["name"] == "mlp":
        return int(model["params"]["hidden"][-1])
    if model["name"] == "unet":
        return DENSE_DEFAULT
    return POOLED[model["name"]]


def test_every_tfl_fedsr_cell_uses_the_head_width():
    config = Config(load_paper_config())
    checked = {}
    for name, experiment in config.experiments.items():
        if not name.startswith("tfl_"):
            continue
        model = config.datasets[experiment["dataset"]]["model"]
        for method_id in experiment["methods"]:
            method = config.methods[method_id]
            if method["method"] != "fedsr":
                continue
            z_dim = method["params"]["z_dim"]
            if z_dim is None:  # fedsr's default: 64 dense, else 512
                z_dim = DENSE_DEFAULT if method["params"]["dense"] else 512
            checked[(model["name"], method_id)] = z_dim
            assert z_dim == head_width(model), f"{name}: {method_id} z_dim {z_dim} on {model}"
    # eICU's 64-wide MLP, PACS' ResNet18, OfficeHome's ResNet50 and FeTS' U-Net are all checked
    assert {m for m, _ in checked} == {"mlp", "resnet18", "resnet50", "unet"}
