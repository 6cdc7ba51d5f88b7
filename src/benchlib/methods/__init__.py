"""Aggregation methods, one module each, behind one interface (see :mod:`.base`).

The package itself is torch-free: :mod:`.catalog` (the declarations) is read when a config
loads, and the interface (torch) is imported on first use of a name below.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "Method",
    "P2PMethod",
    "P2PResult",
    "PeerEvaluator",
    "PeerView",
    "StarMethod",
    "StarRound",
    "TrainingContext",
    "build_method",
    "get_method_class",
    "method_names",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("benchlib.methods.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
