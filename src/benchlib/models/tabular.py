"""``mlp``: a multilayer perceptron for tabular rows (regression or classification)."""

from __future__ import annotations

from torch import nn


def mlp(
    num_outputs: int,
    input_shape: tuple[int, ...],
    *,
    hidden: tuple[int, ...],
    dropout: float,
) -> nn.Module:
    layers: list[nn.Module] = []
    width = input_shape[0]
    for size in hidden:
        layers += [nn.Linear(width, size), nn.ReLU()]
        if dropout:
            layers.append(nn.Dropout(dropout))
        width = size
    layers.append(nn.Linear(width, num_outputs))
    return nn.Sequential(*layers)
