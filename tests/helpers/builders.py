"""Methods and models built the way tests write them: only the parameters a test varies, the
rest filled by the declaration (as the config fills them); the builders in benchlib take
filled parameters only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchlib.methods.base import Method
from benchlib.methods.base import build_method as build_filled_method
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import MODELS


def build_method(name: str, params: Mapping[str, Any] | None = None) -> Method:
    """Method ``name`` with ``params`` checked and filled by its declaration."""
    return build_filled_method(name, METHODS.get(name).params.resolve(f"method {name!r}", params))


def build_model(
    name: str,
    num_outputs: int,
    input_shape: tuple[int, ...],
    params: Mapping[str, Any] | None = None,
) -> Any:
    """Model ``name`` with ``params`` checked and filled by its declaration."""
    from benchlib.models import build_model as build_filled_model

    filled = MODELS.get(name).params.resolve(f"model {name!r} params", params)
    return build_filled_model(name, num_outputs, input_shape, filled)
