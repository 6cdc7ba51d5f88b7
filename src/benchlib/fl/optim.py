"""Optimizers and losses by name, built from the optimizer's own training fields
(:meth:`benchlib.declarations.settings.TrainingSettings.optimizer_fields`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from benchlib.primitives.errors import BenchlibError

OptimizerBuilder = Callable[[list[nn.Parameter], float, float, float], torch.optim.Optimizer]

_OPTIMIZERS: dict[str, OptimizerBuilder] = {
    "adam": lambda params, lr, _momentum, decay: torch.optim.Adam(
        params, lr=lr, weight_decay=decay
    ),
    "sgd": lambda params, lr, momentum, decay: torch.optim.SGD(
        params, lr=lr, momentum=momentum, weight_decay=decay
    ),
}

_LOSSES: dict[str, Callable[[], nn.Module]] = {"cross_entropy": nn.CrossEntropyLoss}


def build_optimizer(
    params: list[nn.Parameter], *, optimizer: str, lr: float, momentum: float, weight_decay: float
) -> torch.optim.Optimizer:
    """The optimizer named ``optimizer`` (one of ``training.optimizer``'s declared enum; Adam
    has no momentum)."""
    return _OPTIMIZERS[optimizer](params, lr, momentum, weight_decay)


def build_loss(name: str) -> nn.Module:
    """The loss named ``name``."""
    if name not in _LOSSES:
        raise BenchlibError(f"unknown loss {name!r}; choose one of: {sorted(_LOSSES)}")
    return _LOSSES[name]()
