"""Optimizers and losses by name, built from the experiment's training config."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from benchlib.errors import BenchlibError
from benchlib.settings import TrainingSettings

OptimizerBuilder = Callable[[list[nn.Parameter], TrainingSettings], torch.optim.Optimizer]

_OPTIMIZERS: dict[str, OptimizerBuilder] = {
    "adam": lambda params, cfg: torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay),
    "sgd": lambda params, cfg: torch.optim.SGD(
        params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay
    ),
}

_LOSSES: dict[str, Callable[[], nn.Module]] = {"cross_entropy": nn.CrossEntropyLoss}


def build_optimizer(
    params: list[nn.Parameter], training: TrainingSettings
) -> torch.optim.Optimizer:
    """The optimizer named by ``training.optimizer`` (one of its declared enum)."""
    return _OPTIMIZERS[training.optimizer](params, training)


def build_loss(name: str) -> nn.Module:
    """The loss named ``name``."""
    if name not in _LOSSES:
        raise BenchlibError(f"unknown loss {name!r}; choose one of: {sorted(_LOSSES)}")
    return _LOSSES[name]()
