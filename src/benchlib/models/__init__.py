"""Models by name (see :mod:`.catalog` for the declarations, :mod:`.registry` to build one).

The package itself is torch-free; the builders (torch) are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_model", "model_names"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("benchlib.models.registry"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
