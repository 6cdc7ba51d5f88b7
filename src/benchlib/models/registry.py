"""Build a model by name. Each builder takes (num_outputs, input_shape, **params) -> nn.Module.

Names, builders (``"module:function"``) and parameters are declared in
:data:`benchlib.models.catalog.MODELS` (or by a plugin); the builder's module is imported the
first time its model is built, and the builder receives every declared parameter (defaults
filled). ``input_shape`` is ``(C, H, W)`` for images and ``(F,)`` for tabular rows;
``num_outputs`` is the class count (classification, segmentation: classes incl. background) or
the target dimension (regression).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from torch import nn

from benchlib.declarations.registry import import_object
from benchlib.models.catalog import MODELS
from benchlib.primitives.errors import BenchlibError

ModelBuilder = Callable[..., nn.Module]


def model_names() -> list[str]:
    """Every declared model (built-in and plugins')."""
    return MODELS.names()


def model_builder(name: str) -> ModelBuilder:
    """The builder function that model ``name``'s declaration names."""
    builder = import_object(MODELS.get(name).implementation, f"model {name!r}")
    if not callable(builder):
        raise BenchlibError(f"model {name!r}: {MODELS.get(name).implementation} is not callable")
    return builder


def build_model(
    name: str, num_outputs: int, input_shape: tuple[int, ...], params: Mapping[str, Any]
) -> nn.Module:
    """Build model ``name`` for ``num_outputs`` outputs and inputs of ``input_shape`` from its
    filled parameters (a resolved spec's: every declared one; nothing is checked again)."""
    model = model_builder(name)(num_outputs, tuple(input_shape), **params)
    if not isinstance(model, nn.Module):
        raise BenchlibError(f"model {name!r}: its builder returned {type(model).__name__}")
    return model
