"""ImageNet-pretrained weights for the vision backbones: fetched once on the submitting host,
loaded offline by the cells.

The weights are torchvision's (``IMAGENET1K_V1``): their file names carry the first hex digits of
the file's sha256 (torch.hub's convention, e.g. ``densenet121-a639ec97.pth``), which is the
library's own checksum: :func:`fetch_weights` downloads through ``torch.hub`` with that hash
check, and :func:`load_pretrained` re-checks it before loading (``weights_only``). The workflow's
``fetch_weights`` rule (workflow/rules/weights.smk) puts the file at
``results/weights/<file name>``; a model config asks for it with ``params: {pretrained: true}``
(``weights_url`` names a mirror whose file name follows the same convention).

The URLs and paths (torch-free, read while the workflow parses) are in
:mod:`benchlib.primitives.weights`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.weights import hash_prefix

# torchvision's DenseNet checkpoints predate dots in layer names ("norm.1" for "norm1")
_DENSENET_OLD_KEY = re.compile(
    r"^(.*denselayer\d+\.(?:norm|relu|conv))\."
    r"((?:[12])\.(?:weight|bias|running_mean|running_var|num_batches_tracked))$"
)


def fetch_weights(url: str, target: str | Path) -> Path:
    """Download ``url`` to ``target`` through torch.hub, checking the file name's sha256 prefix."""
    import torch

    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:  # torch.hub writes a temporary file and moves it into place only when the hash matches
        torch.hub.download_url_to_file(url, str(target), hash_prefix(target.name), progress=False)
    except RuntimeError as exc:
        raise BenchlibError(
            f"{url} does not match the sha256 prefix in its name ({' '.join(str(exc).split())}); "
            "retry, or fix the model's weights_url"
        ) from exc
    except OSError as exc:
        raise BenchlibError(
            f"download of {url} failed ({exc}); run the fetch_weights rule where there is network"
        ) from exc
    return target


def load_pretrained(model: Any, path: str | Path, head: str) -> Any:
    """Load the weights at ``path`` into ``model``, all but the classifier ``head`` (a new one
    for this task's classes); the file must match its name's sha256 prefix."""
    import torch

    path = Path(path)
    require(
        path.is_file(),
        f"pretrained weights {path} are missing; fetch them on a host with network first "
        f"(snakemake {path}), or set pretrained: false",
    )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    expected = hash_prefix(path.name)
    require(
        digest.startswith(expected),
        f"{path} has sha256 {digest[:16]}..., not the {expected} its name says; the file is "
        "corrupt: delete it and fetch it again",
    )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a damaged file
        raise BenchlibError(f"{path} is not a readable state dict ({exc}); fetch it again") from exc
    state = {_DENSENET_OLD_KEY.sub(r"\1\2", key): value for key, value in state.items()}
    own = model.state_dict()
    body = {k: v for k, v in state.items() if not k.startswith(f"{head}.")}
    # old checkpoints lack BatchNorm's step counters (integer buffers no one trains)
    lacking = sorted(
        k
        for k in own
        if not k.startswith(f"{head}.") and k not in body and not k.endswith("num_batches_tracked")
    )
    unknown = sorted(k for k in body if k not in own)
    wrong = sorted(k for k in body if k in own and own[k].shape != body[k].shape)
    require(
        not (lacking or unknown or wrong),
        f"{path} does not fit the model (missing {lacking[:2]}, unexpected {unknown[:2]}, "
        f"other shapes {wrong[:2]}); it holds weights of another architecture",
    )
    model.load_state_dict(body, strict=False)
    return model
