"""Regression on tabular rows: float features in, float targets out; MSE."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
import torch
from torch import nn

from benchlib.primitives.metrics import mean_absolute_error, mean_squared_error
from benchlib.tasks.base import Task, register_task


@register_task
class Regression(Task):
    name = "regression"
    target_kind = "targets"
    target_dtype = np.float32
    losses: ClassVar[dict[str, Callable[..., nn.Module]]] = {"mse": nn.MSELoss, "l1": nn.L1Loss}

    def num_outputs(self, arrays: dict[str, np.ndarray], num_classes: int) -> int:
        return int(arrays["targets"].shape[1])  # one output per target column

    def scorers(
        self, outputs: torch.Tensor, targets: torch.Tensor
    ) -> dict[str, Callable[[], float]]:
        outputs, targets = outputs.double(), targets.double()
        return {
            "mse": lambda: mean_squared_error(outputs, targets),
            "mae": lambda: mean_absolute_error(outputs, targets),
        }
