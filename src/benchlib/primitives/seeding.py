"""Keyed random streams: every random draw is a pure function of (seed, purpose, round, client).

Keying by purpose instead of drawing from one global stream means that every method faces the
same malfunction schedule and noise, and a resumed run draws exactly what an uninterrupted run
would have drawn, without storing generator state in checkpoints. Torch generators for the same
streams: :mod:`benchlib.fl.rng`.
"""

from __future__ import annotations

import zlib

import numpy as np

_PURPOSE_CACHE: dict[str, int] = {}


def _purpose_id(purpose: str) -> int:
    if purpose not in _PURPOSE_CACHE:
        _PURPOSE_CACHE[purpose] = zlib.crc32(purpose.encode("utf-8"))
    return _PURPOSE_CACHE[purpose]


def derive_seed(seed: int, purpose: str, *keys: int) -> int:
    """A 63-bit integer seed derived from ``seed``, a purpose string and integer keys."""
    seq = np.random.SeedSequence([int(seed), _purpose_id(purpose), *(int(k) for k in keys)])
    return int(seq.generate_state(2, dtype=np.uint32).astype(np.uint64) @ [1 << 31, 1]) & (
        (1 << 63) - 1
    )


def numpy_rng(seed: int, purpose: str, *keys: int) -> np.random.Generator:
    """A NumPy generator for one (seed, purpose, keys) stream."""
    return np.random.default_rng(derive_seed(seed, purpose, *keys))
