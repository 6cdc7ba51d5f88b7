"""Opt-in reduced-precision compute for a cell's forward passes (``training.precision``).

- ``fp32`` (default): float32 everywhere, as PyTorch does by default (cuDNN convolutions may
  still use TF32 on Ampere and newer GPUs: that is PyTorch's own default).
- ``tf32``: on CUDA also matrix multiplications in TF32 (``torch.backends.cuda.matmul``); no
  effect on CPU.
- ``bf16``: forwards under ``torch.autocast`` with bfloat16. Parameters, gradients, optimizer
  states, losses (computed from the outputs cast to float32) and every aggregation stay
  float32; only the training and evaluation forwards (and their backward passes) compute in
  bfloat16.

The choice applies around the forwards of the training loops and predictions only, never
around the methods' aggregation arithmetic, so ``weights @ vectors`` stays float32.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

PRECISIONS = ("fp32", "tf32", "bf16")


@contextmanager
def compute_precision(precision: str, device: torch.device) -> Iterator[None]:
    """Run the enclosed forwards in ``precision`` on ``device``; restores the TF32 flag after."""
    if precision == "bf16":
        # cache_enabled=False: the cast weights must not outlive a step (optimizer updates
        # them in place) and CUDA graph capture requires it
        with torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=False):
            yield
    elif precision == "tf32" and device.type == "cuda":
        before = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
    else:
        yield
