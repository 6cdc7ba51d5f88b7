"""``small_unet``: a compact U-Net (MONAI's BasicUNet) for small 2-D segmentation inputs.

Outputs ``[N, classes, H, W]`` scores (classes include background). The LIGHTYEAR paper trains a
TransUNet on 64x64 images; this small U-Net is the CPU-sized stand-in used by tests and demos.
"""

from __future__ import annotations

from monai.networks.nets import BasicUNet
from torch import nn

from benchlib.models.registry import register_model


@register_model("small_unet")
def small_unet(
    num_classes: int,
    image_shape: tuple[int, ...],
    features: tuple[int, ...] = (8, 8, 16, 32, 64, 8),
    dropout: float = 0.0,
) -> nn.Module:
    channels = image_shape[0]
    return BasicUNet(
        spatial_dims=2,
        in_channels=channels,
        out_channels=num_classes,
        features=tuple(features),
        dropout=dropout,
    )
