"""Learning tasks: classification, segmentation, regression (one module each, see :mod:`.base`).

The package itself is torch-free: :mod:`.catalog` declares the tasks' losses and metrics for the
config check; the implementations (torch) are imported on first use of a name below.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Task", "get_task"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("benchlib.tasks.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
