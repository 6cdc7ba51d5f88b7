"""Per-dataset input transforms: normalisation and seeded per-sample training augmentation.

Augmentations are torchvision.transforms.v2 classes named in the dataset config (``transforms.train:
[{name: RandomHorizontalFlip, p: 0.5}, ...]``, names from
:data:`benchlib.declarations.settings.TRANSFORMS`). Each sample of a batch draws its own random
parameters; the draws come from a keyed seed per batch (seed, round, client, epoch, batch), so a
resumed run augments exactly as an uninterrupted one. Segmentation masks get the same geometric
transform as their image (tv_tensors.Mask), never the photometric ones.

``input_size`` fixes the side of the model's square input: a batch of another size (evaluation
batches, or training batches no augmentation resized) is centre-cropped to ``eval_crop`` (if set)
and resized to it, e.g. Isic19's 200 px training crops of 224 px store images (image classification:
masks are not fitted, so segmentation configs leave ``input_size`` unset). The section's keys and
defaults are declared in :class:`benchlib.declarations.settings.TransformSettings`. torchvision is
imported only when a dataset's transforms use it (importing it costs a cell start-up about a second
of CPU, and most cells have no transforms).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import Any

import torch

from benchlib.declarations.settings import TransformSettings
from benchlib.primitives.errors import BenchlibError


def _v2() -> ModuleType:
    """torchvision.transforms.v2, imported on first use."""
    from torchvision.transforms import v2

    return v2


class Transforms:
    """Normalisation (every batch) and augmentation (training batches) of one dataset."""

    def __init__(self, settings: TransformSettings | Mapping[str, Any] | None = None) -> None:
        if not isinstance(settings, TransformSettings):  # a section as a config gives it
            settings = TransformSettings.from_config("transforms", settings)
        self.augmentation = self.normalization = None
        if settings.train:
            v2 = _v2()
            steps = []
            for step in settings.train:
                step = dict(step)
                name = step.pop("name")  # one of catalog.TRANSFORMS: the declaration checked it
                try:
                    steps.append(getattr(v2, name)(**step))
                except (TypeError, ValueError) as exc:
                    raise BenchlibError(f"transform {name}: bad parameters {step} ({exc})") from exc
            self.augmentation = v2.Compose(steps)
        norm = settings.normalize
        if norm is not None:
            self.normalization = _v2().Normalize(mean=norm["mean"], std=norm["std"])
        self.input_size = settings.input_size
        self.eval_crop = settings.eval_crop

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fit(x)
        return x if self.normalization is None else self.normalization(x)

    def fit(self, x: torch.Tensor) -> torch.Tensor:
        """Centre crop (``eval_crop``) and resize an image batch to ``input_size``, if set."""
        if self.input_size is None or x.ndim != 4 or x.shape[-2:] == (self.input_size,) * 2:
            return x
        v2 = _v2()
        if self.eval_crop is not None:
            x = v2.functional.center_crop(x, [self.eval_crop, self.eval_crop])
        return v2.functional.resize(x, [self.input_size, self.input_size], antialias=True)

    def augment(
        self, x: torch.Tensor, y: torch.Tensor, seed: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Augment each sample of a float image batch with its own random parameters."""
        if self.augmentation is None:
            return x, y
        from torchvision import tv_tensors

        is_mask = y.ndim == 3  # segmentation: [B, H, W] masks move with their images
        images, targets = [], []
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for i in range(len(x)):
                if is_mask:
                    image, mask = self.augmentation(tv_tensors.Image(x[i]), tv_tensors.Mask(y[i]))
                    targets.append(mask.as_subclass(torch.Tensor))
                else:
                    image = self.augmentation(tv_tensors.Image(x[i]))
                images.append(image.as_subclass(torch.Tensor))
        return torch.stack(images), torch.stack(targets) if is_mask else y
