"""The models a config may name: builder and parameters, declared once (torch-free).

Each :class:`ModelDeclaration` names its builder as ``"module:function"``; the module is
imported the first time the model is built (:func:`benchlib.models.registry.build_model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchlib.declarations.params import BOOLEAN, NO_PARAMS, Param, Params
from benchlib.declarations.registry import Registry
from benchlib.declarations.settings import Entry

MODEL_INIT = Param(
    {"enum": ["shared", "per_client", None]},
    None,
    "null - the method's choice (per_client for the LIGHTYEAR authors' P2P variants, else "
    "shared); shared - one seeded initial model for all clients; per_client - a separate "
    "random start per client",
)


@dataclass(frozen=True, eq=False)
class ModelSettings(Entry):
    """A dataset's ``model`` section resolved: the model, its parameters (every one, defaults
    filled) and the initial-model choice."""

    name: str
    params: Mapping[str, Any]
    init: str | None

    @classmethod
    def from_config(cls, what: str, model: Mapping[str, Any]) -> ModelSettings:
        """Check a config's model section against the model's declaration; fill the defaults."""
        name = model["name"]
        params = MODELS.get(name).params.resolve(
            f"{what}model {name!r} params", model.get("params")
        )
        return cls(name, params, model.get("init", MODEL_INIT.default))


@dataclass(frozen=True)
class ModelDeclaration:
    """A model: its builder (``"module:function"``, called as ``builder(num_outputs,
    input_shape, **params)``) and its parameters (a config's ``model.params``; the builder
    receives every one, defaults filled in)."""

    implementation: str
    params: Params = NO_PARAMS
    description: str = ""


def declare_model(
    name: str,
    implementation: str,
    params: Params | dict[str, Param] | None = None,
    description: str = "",
) -> ModelDeclaration:
    """Declare model ``name`` (for plugins: call it in the entry point's module)."""
    declared = params if isinstance(params, Params) else Params(dict(params or {}))
    return MODELS.add(name, ModelDeclaration(implementation, declared, description))


def _widths(default: list[int], description: str, min_items: int = 1) -> Param:
    schema = {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": min_items}
    return Param(schema, default, description)


DROPOUT = {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
_IMAGENET = {
    "pretrained": Param(
        BOOLEAN, False, "start from ImageNet weights (results/weights, the fetch_weights rule)"
    ),
    "weights_url": Param(
        {"type": "string"}, "", "download the weights from this URL instead of the pinned one"
    ),
}

MODELS: Registry[ModelDeclaration] = Registry("model")
declare_model(
    "femnist_cnn",
    "benchlib.models.cnn:build_femnist_cnn",
    {
        "conv1": Param({"type": "integer", "minimum": 1}, 32, "channels of conv block 1"),
        "conv2": Param({"type": "integer", "minimum": 1}, 64, "channels of conv block 2"),
        "hidden": Param({"type": "integer", "minimum": 1}, 512, "hidden units"),
        "dropout": Param(DROPOUT, 0.5, "dropout before the output layer"),
    },
)
declare_model("densenet121", "benchlib.models.vision:build_densenet121", _IMAGENET)
declare_model("resnet18", "benchlib.models.vision:build_resnet18", _IMAGENET)
declare_model("resnet50", "benchlib.models.vision:build_resnet50", _IMAGENET)
declare_model("efficientnet_b0", "benchlib.models.vision:build_efficientnet_b0", _IMAGENET)
declare_model(
    "small_unet",
    "benchlib.models.segmentation:small_unet",
    {
        "features": _widths([8, 8, 16, 32, 64, 8], "channels per U-Net level (6)"),
        "dropout": Param(DROPOUT, 0.0, "dropout in the U-Net blocks"),
    },
)
declare_model(
    "unet",
    "benchlib.models.segmentation:unet",
    {
        "features": _widths([64, 128, 256, 512, 1024, 64], "channels per U-Net level (6)"),
        "dropout": Param(DROPOUT, 0.0, "dropout in the U-Net blocks"),
        "norm": Param({"enum": ["instance", "batch"]}, "instance", "normalisation layers"),
    },
)
declare_model(
    "transunet",
    "benchlib.models.transunet:transunet",
    {
        "resnet_layers": _widths([3, 4, 9], "ResNet-50 blocks per hybrid stage"),
        "resnet_channels": _widths([256, 512, 1024], "channels per hybrid stage"),
        "stem_channels": Param(
            {"type": "integer", "minimum": 1}, 64, "channels of the ResNet stem"
        ),
        "norm_groups": Param(
            {"type": "integer", "minimum": 1}, 32, "groups of the GroupNorm layers"
        ),
        "hidden_size": Param({"type": "integer", "minimum": 1}, 768, "transformer width"),
        "depth": Param({"type": "integer", "minimum": 1}, 12, "transformer layers"),
        "heads": Param({"type": "integer", "minimum": 1}, 12, "attention heads"),
        "mlp_dim": Param({"type": "integer", "minimum": 1}, 3072, "transformer MLP width"),
        "dropout": Param(DROPOUT, 0.1, "transformer dropout"),
        "decoder_channels": _widths([256, 128, 64, 16], "channels per decoder stage"),
        "head_channels": Param(
            {"type": "integer", "minimum": 1}, 512, "channels before the decoder"
        ),
    },
)
declare_model(
    "mlp",
    "benchlib.models.tabular:mlp",
    {
        "hidden": _widths([64, 64], "units per hidden layer ([] = a linear model)", 0),
        "dropout": Param(DROPOUT, 0.0, "dropout after every hidden layer"),
    },
)
declare_model(
    "fedavg_cnn",
    "benchlib.models.tfl:fedavg_cnn",
    {
        "channels": _widths([32, 64], "channels of the two conv layers"),
        "hidden": Param({"type": "integer", "minimum": 1}, 512, "hidden units"),
    },
)
