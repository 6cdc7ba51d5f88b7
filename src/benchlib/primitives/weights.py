"""Where ImageNet-pretrained weights come from and where the workflow keeps them (torch-free:
the workflow calls these while parsing; loading and fetching are in benchlib.models.pretrained).

The weights are torchvision's (``IMAGENET1K_V1``); their file names carry the first hex digits of
the file's sha256 (torch.hub's convention, e.g. ``densenet121-a639ec97.pth``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from benchlib.primitives import layout
from benchlib.primitives.errors import require

WEIGHTS_DIR = layout.WEIGHTS
WEIGHTS_URLS = {
    "densenet121": "https://download.pytorch.org/models/densenet121-a639ec97.pth",
    "efficientnet_b0": "https://download.pytorch.org/models/efficientnet_b0_rwightman-7f5810bc.pth",
    "resnet18": "https://download.pytorch.org/models/resnet18-f37072fd.pth",
    "resnet50": "https://download.pytorch.org/models/resnet50-0676ba61.pth",
}
_HASH_PREFIX = re.compile(r"-([a-f0-9]{8,64})\.")


def weights_url(model: str, params: dict[str, Any]) -> str:
    """The URL of ``model``'s pretrained weights (a non-empty ``params.weights_url`` overrides
    the pinned torchvision one)."""
    url = str(params.get("weights_url") or WEIGHTS_URLS.get(model, ""))
    require(
        bool(url),
        f"model {model!r} has no pretrained weights here; choose one of "
        f"{', '.join(sorted(WEIGHTS_URLS))} or set pretrained: false",
    )
    return url


def hash_prefix(filename: str) -> str:
    """The sha256 prefix a torch.hub file name carries (``name-<hex>.pth``)."""
    match = _HASH_PREFIX.search(filename)
    require(
        match is not None,
        f"weights file name {filename!r} carries no sha256 prefix (name-<hex>.pth); give a "
        "weights_url whose file name does",
    )
    assert match is not None
    return match.group(1)


def weights_path(model: str, params: dict[str, Any], folder: str = WEIGHTS_DIR) -> str:
    """Where the workflow keeps ``model``'s weights: ``<folder>/<file name of the URL>``."""
    name = Path(urlparse(weights_url(model, params)).path).name
    hash_prefix(name)
    return f"{folder}/{name}"
