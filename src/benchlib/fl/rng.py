"""Torch generators for the keyed random streams of :mod:`benchlib.primitives.seeding`.

Kept apart from :mod:`benchlib.primitives.seeding` so that the data steps and config checks, which
use only the NumPy streams, never import torch.
"""

from __future__ import annotations

import torch

from benchlib.primitives.seeding import derive_seed


def torch_generator(seed: int, purpose: str, *keys: int) -> torch.Generator:
    """A CPU torch generator for one (seed, purpose, keys) stream."""
    generator = torch.Generator()
    generator.manual_seed(derive_seed(seed, purpose, *keys))
    return generator


def seed_torch_global(seed: int, purpose: str, *keys: int) -> None:
    """Seed torch's global RNG (dropout, default init) for one keyed stream."""
    torch.manual_seed(derive_seed(seed, purpose, *keys))
