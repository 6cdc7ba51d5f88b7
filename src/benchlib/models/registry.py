"""Models by name. Each builder takes (num_outputs, input_shape, **params) -> nn.Module.

Names, the module that registers each and their parameters are declared in
:data:`benchlib.catalog.MODELS`; the module is imported the first time its model is built, and
the builder receives every declared parameter (defaults filled). ``input_shape`` is
``(C, H, W)`` for images and ``(F,)`` for tabular rows; ``num_outputs`` is the class count
(classification, segmentation: classes incl. background) or the target dimension (regression).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from torch import nn

from benchlib.catalog import MODELS
from benchlib.registry import Registry

ModelBuilder = Callable[..., nn.Module]
_BUILDERS: Registry[ModelBuilder] = Registry("model implementation")
register_model = _BUILDERS.register


def model_names() -> list[str]:
    return MODELS.names()


def build_model(
    name: str, num_outputs: int, input_shape: tuple[int, ...], params: dict[str, Any] | None = None
) -> nn.Module:
    """Build model ``name`` for ``num_outputs`` outputs and inputs of ``input_shape``."""
    entry = MODELS.get(name)
    importlib.import_module(f"benchlib.models.{entry.module}")
    resolved = entry.params.resolve(f"model {name!r} params", params)
    return _BUILDERS.get(name)(num_outputs, tuple(input_shape), **resolved)
