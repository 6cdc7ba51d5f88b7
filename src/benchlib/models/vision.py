"""Standard image backbones from torchvision and timm, randomly initialised unless a config asks
for ImageNet weights (``pretrained: true``: fetched by the workflow beforehand, see
:mod:`benchlib.models.pretrained`; the cell itself never downloads)."""

from __future__ import annotations

from torch import nn

from benchlib.models.pretrained import load_pretrained
from benchlib.primitives.errors import require
from benchlib.primitives.weights import weights_path


def _with_input_channels(model: nn.Module, attr: str, channels: int) -> nn.Module:
    conv = getattr(model, attr)
    if channels != conv.in_channels:
        setattr(
            model,
            attr,
            nn.Conv2d(
                channels,
                conv.out_channels,
                kernel_size=conv.kernel_size,
                stride=conv.stride,
                padding=conv.padding,
                bias=conv.bias is not None,
            ),
        )
    return model


def _url(weights_url: str) -> dict[str, str]:
    return {"weights_url": weights_url} if weights_url else {}


def build_densenet121(
    num_classes: int, image_shape: tuple[int, ...], *, pretrained: bool, weights_url: str
) -> nn.Module:
    """torchvision DenseNet-121 with a new classifier (LIGHTYEAR Camelyon17: not pretrained)."""
    from torchvision.models import densenet121

    model = densenet121(weights=None, num_classes=num_classes)
    _with_input_channels(model.features, "conv0", image_shape[0])
    if pretrained:
        load_pretrained(model, weights_path("densenet121", _url(weights_url)), head="classifier")
    return model


def _resnet(
    name: str, num_classes: int, image_shape: tuple[int, ...], pretrained: bool, weights_url: str
) -> nn.Module:
    from torchvision import models

    model = getattr(models, name)(weights=None, num_classes=num_classes)
    if pretrained:
        require(
            image_shape[0] == 3,
            f"{name}: ImageNet weights need 3 input channels, the data have {image_shape[0]}; "
            "set pretrained: false",
        )
        return load_pretrained(model, weights_path(name, _url(weights_url)), head="fc")
    return _with_input_channels(model, "conv1", image_shape[0])


def build_resnet18(
    num_classes: int, image_shape: tuple[int, ...], *, pretrained: bool, weights_url: str
) -> nn.Module:
    """torchvision ResNet-18; with ``pretrained`` its ImageNet weights (IMAGENET1K_V1) and a new
    classifier (TFL: PACS)."""
    return _resnet("resnet18", num_classes, image_shape, pretrained, weights_url)


def build_resnet50(
    num_classes: int, image_shape: tuple[int, ...], *, pretrained: bool, weights_url: str
) -> nn.Module:
    """torchvision ResNet-50; with ``pretrained`` its ImageNet weights (IMAGENET1K_V1) and a new
    classifier (TFL: OfficeHome)."""
    return _resnet("resnet50", num_classes, image_shape, pretrained, weights_url)


def build_efficientnet_b0(
    num_classes: int, image_shape: tuple[int, ...], *, pretrained: bool, weights_url: str
) -> nn.Module:
    """timm EfficientNet-B0, randomly initialised (no hub download); with ``pretrained`` the
    torchvision EfficientNet-B0 with its ImageNet weights (the ones torchvision checksums) and a
    new classifier, as FLamby's Fed-ISIC2019 baseline starts from ImageNet."""
    if pretrained:
        from torchvision.models import efficientnet_b0

        model = efficientnet_b0(weights=None, num_classes=num_classes)
        return load_pretrained(
            model, weights_path("efficientnet_b0", _url(weights_url)), "classifier.1"
        )
    import timm

    return timm.create_model(
        "efficientnet_b0", pretrained=False, num_classes=num_classes, in_chans=image_shape[0]
    )
