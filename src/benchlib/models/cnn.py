"""The LIGHTYEAR FEMNIST CNN (paper Table 1; authors' networks/cnn_femnist.py).

conv 1->32 5x5 pad 2, ReLU, maxpool 2; conv 32->64 5x5 pad 2, ReLU, maxpool 2;
FC (64*H/4*W/4)->512, ReLU, dropout 0.5; FC 512->classes. Widths are parameters so that the
laptop demo can use a narrower copy of the same architecture.
"""

from __future__ import annotations

import torch
from torch import nn


class FemnistCNN(nn.Module):
    """Two conv blocks and two fully connected layers."""

    def __init__(
        self,
        num_classes: int,
        image_shape: tuple[int, ...],
        *,
        conv1: int,
        conv2: int,
        hidden: int,
        dropout: float,
    ) -> None:
        super().__init__()
        channels, height, width = image_shape
        self.features = nn.Sequential(
            nn.Conv2d(channels, conv1, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(conv1, conv2, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        flat = conv2 * (height // 4) * (width // 4)
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(flat, hidden),
            nn.ReLU(),
            nn.Dropout(dropout),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def build_femnist_cnn(
    num_classes: int,
    image_shape: tuple[int, ...],
    *,
    conv1: int,
    conv2: int,
    hidden: int,
    dropout: float,
) -> nn.Module:
    return FemnistCNN(
        num_classes, image_shape, conv1=conv1, conv2=conv2, hidden=hidden, dropout=dropout
    )
