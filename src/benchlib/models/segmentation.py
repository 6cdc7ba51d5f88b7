"""2-D U-Nets (MONAI's BasicUNet): ``unet`` (TFL's FeTS model) and ``small_unet`` (CPU-sized).

Both output ``[N, classes, H, W]`` scores (classes include background). BasicUNet is the
Ronneberger et al. (2015) layout: four 2x2 max-pool downsamplings, two 3x3 convolutions per
level, transposed-convolution upsampling with skip concatenation, a 1x1 head; it pads its
convolutions (output size = input size, H and W divisible by 16) and normalises each convolution
(affine instance norm by default: no running statistics to average across clients).
``small_unet`` keeps MONAI's defaults (LeakyReLU 0.1).
"""

from __future__ import annotations

from typing import Any

from monai.networks.nets import BasicUNet
from torch import nn

from benchlib.primitives.errors import require

# Ronneberger et al.'s widths: 64, 128, 256, 512 and 1024 channels, 64 before the head.


def _basic_unet(
    num_classes: int,
    image_shape: tuple[int, ...],
    features: tuple[int, ...],
    dropout: float,
    **options: Any,
) -> nn.Module:
    return BasicUNet(
        spatial_dims=2,
        in_channels=image_shape[0],
        out_channels=num_classes,
        features=tuple(features),
        dropout=dropout,
        **options,
    )


def unet(
    num_classes: int,
    image_shape: tuple[int, ...],
    *,
    features: tuple[int, ...],
    dropout: float,
    norm: str,
) -> nn.Module:
    """The U-Net of TFL's FeTS experiments (the paper cites Ronneberger et al. 2015): ReLU,
    ``norm`` ``instance`` (affine) or ``batch``; images of at least 32 x 32 pixels."""
    require(
        min(image_shape[1:]) >= 32,
        f"unet needs images of at least 32 x 32 pixels (its 1/16 level normalises over more than "
        f"one pixel), got {tuple(image_shape[1:])}; raise the dataset's image size",
    )
    return _basic_unet(
        num_classes, image_shape, features, dropout, act="relu", norm=(norm, {"affine": True})
    )


def small_unet(
    num_classes: int,
    image_shape: tuple[int, ...],
    *,
    features: tuple[int, ...],
    dropout: float,
) -> nn.Module:
    """A narrow U-Net for tests and CPU runs (LIGHTYEAR's TransUNet stand-in)."""
    return _basic_unet(num_classes, image_shape, features, dropout)
