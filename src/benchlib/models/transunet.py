"""``transunet``: TransUNet (Chen et al. 2021/2024) for small 2-D inputs, the LIGHTYEAR paper's
segmentation model (ultrasound and X-ray at 64x64).

Hybrid encoder: a ResNetV2 (timm: StdConv + GroupNorm bottlenecks, non-pre-activation, 'same'
stem) gives features at 1/2, 1/4, 1/8 and 1/16 of the input; the 1/16 map is embedded with
patch size 1 (one token per feature pixel, i.e. 16x16-pixel patches of the image; timm
``PatchEmbed``) plus a learned position embedding and passed through ``depth`` pre-norm ViT
blocks (timm ``Block``: attention with qkv bias, MLP, dropout) and a LayerNorm. Cascaded
upsampler: the tokens as a map, a 3x3 conv to 512 channels, then four (bilinear x2 upsample,
concatenate the skip at that scale, two 3x3 conv-BN-ReLU from MONAI ``Convolution``) blocks
with the 1/8, 1/4 and 1/2 skips and none at full size, and a 3x3 head.

Defaults are TransUNet's R50-ViT-B/16: ResNet layers (3, 4, 9), widths 256/512/1024, stem 64;
hidden size 768, depth 12, 12 heads, MLP 3072, dropout 0.1; decoder 256/128/64/16. For a 64x64
single-channel input and 2 classes that is 105,132,994 parameters
(``tests/models/test_transunet.py``) and a 4x4 token grid. The model is built for one input
size; its sides must be multiples of 16.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from monai.networks.blocks import Convolution
from timm.layers import GroupNormAct, PatchEmbed, trunc_normal_
from timm.models.resnetv2 import ResNetV2
from timm.models.vision_transformer import Block
from torch import nn

from benchlib.primitives.errors import require


def _conv_bn_relu(in_channels: int, out_channels: int) -> nn.Module:
    return Convolution(2, in_channels, out_channels, kernel_size=3, act="RELU", norm="BATCH")


class DecoderBlock(nn.Module):
    """Upsample x2 (bilinear), concatenate the skip (if any), two 3x3 conv-BN-ReLU."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int) -> None:
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv1 = _conv_bn_relu(in_channels + skip_channels, out_channels)
        self.conv2 = _conv_bn_relu(out_channels, out_channels)

    def forward(self, x: torch.Tensor, skip: torch.Tensor | None = None) -> torch.Tensor:
        x = self.up(x)
        if skip is not None:
            x = torch.cat([x, skip], dim=1)
        return self.conv2(self.conv1(x))


class TransUNet(nn.Module):
    """Hybrid ResNetV2-ViT encoder with a cascaded upsampling decoder; ``[N, classes, H, W]``."""

    def __init__(
        self,
        in_channels: int,
        num_classes: int,
        image_size: tuple[int, int],
        *,
        resnet_layers: tuple[int, int, int],
        resnet_channels: tuple[int, int, int],
        stem_channels: int,
        norm_groups: int,
        hidden_size: int,
        depth: int,
        heads: int,
        mlp_dim: int,
        dropout: float,
        decoder_channels: tuple[int, int, int, int],
        head_channels: int,
    ) -> None:
        super().__init__()
        require(
            len(resnet_layers) == len(resnet_channels) == 3 and len(decoder_channels) == 4,
            "transunet: resnet_layers and resnet_channels need 3 entries, decoder_channels 4",
        )
        require(
            image_size[0] % 16 == 0 and image_size[1] % 16 == 0,
            f"transunet: input sides must be multiples of 16, got {image_size}",
        )
        self.resnet = ResNetV2(
            layers=list(resnet_layers),
            channels=tuple(resnet_channels),
            num_classes=0,
            global_pool="",
            in_chans=in_channels,
            stem_chs=stem_channels,
            stem_type="same",
            preact=False,
            norm_layer=partial(GroupNormAct, num_groups=norm_groups),
        )
        # the 1/2 skip is the stem's normalised conv output, before its max pool
        self.stem_skip = [name for name, _ in self.resnet.stem.named_children()].index("norm")
        grid = (image_size[0] // 16, image_size[1] // 16)
        self.grid = grid
        self.embed = PatchEmbed(
            img_size=grid, patch_size=1, in_chans=resnet_channels[2], embed_dim=hidden_size
        )
        self.position = nn.Parameter(torch.zeros(1, grid[0] * grid[1], hidden_size))
        trunc_normal_(self.position, std=0.02)
        self.embed_dropout = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            Block(
                hidden_size,
                heads,
                mlp_ratio=mlp_dim / hidden_size,
                qkv_bias=True,
                proj_drop=dropout,
            )
            for _ in range(depth)
        )
        self.norm = nn.LayerNorm(hidden_size, eps=1e-6)
        self.conv_more = _conv_bn_relu(hidden_size, head_channels)
        skips = (resnet_channels[1], resnet_channels[0], stem_channels, 0)
        widths = (head_channels, *decoder_channels[:-1])
        self.decoder = nn.ModuleList(
            DecoderBlock(w, s, d) for w, s, d in zip(widths, skips, decoder_channels, strict=True)
        )
        self.head = nn.Conv2d(decoder_channels[-1], num_classes, kernel_size=3, padding=1)

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """The 1/16 feature map and the skips at 1/8, 1/4, 1/2."""
        skips = []
        for i, layer in enumerate(self.resnet.stem):
            x = layer(x)
            if i == self.stem_skip:
                skips.append(x)  # 1/2, before the stem's max pool
        for stage in self.resnet.stages:
            x = stage(x)
            skips.append(x)
        return skips[-1], skips[-2::-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features, skips = self.encode(x)
        tokens = self.embed_dropout(self.embed(features) + self.position)
        for block in self.blocks:
            tokens = block(tokens)
        tokens = self.norm(tokens)
        x = tokens.transpose(1, 2).reshape(len(tokens), -1, *self.grid)
        x = self.conv_more(x)
        for i, block in enumerate(self.decoder):
            x = block(x, skips[i] if i < len(skips) else None)
        return self.head(x)


def transunet(num_classes: int, image_shape: tuple[int, ...], **params: Any) -> nn.Module:
    """TransUNet with every parameter of its declaration (``models/catalog.py``), keyword-only
    and without defaults (the class's)."""
    channels, height, width = image_shape
    return TransUNet(channels, num_classes, (height, width), **params)  # type: ignore[arg-type]
