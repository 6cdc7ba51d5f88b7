"""The plain local-training loop and batched prediction over streamed client data."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from benchlib.fl.data import BatchSource
from benchlib.fl.precision import compute_precision
from benchlib.fl.prefetch import Prefetcher
from benchlib.methods.base import LossHook
from benchlib.primitives.seeding import derive_seed


def epoch_plan(
    source: BatchSource,
    rows: np.ndarray,
    order: np.ndarray,
    batch_size: int,
    augment_key: tuple[int, str, int, int, int] | None = None,
) -> list[tuple[np.ndarray, int | None]]:
    """The epoch's steps: (store rows of the batch, its augmentation seed or None)."""
    plan = []
    for number, start in enumerate(range(0, len(rows), batch_size)):
        seed = None
        if augment_key is not None and source.transforms.augmentation is not None:
            seed_value, stream, *keys = augment_key
            seed = derive_seed(seed_value, f"{stream}/augment", *keys, number)
        plan.append((rows[order[start : start + batch_size]], seed))
    return plan


def train_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    source: BatchSource,
    rows: np.ndarray,
    batch_size: int,
    generator: torch.Generator,
    loss_fn: nn.Module,
    loss_hook: LossHook | None = None,
    augment_key: tuple[int, str, int, int, int] | None = None,
    prefetch: int = 0,
    precision: str = "fp32",
) -> torch.Tensor:
    """One shuffled pass over ``rows``. Returns the summed loss as a tensor (no host sync).

    ``augment_key`` = (seed, stream, round, client, epoch) keys the per-batch augmentation seeds.
    ``prefetch``: streamed batches gathered ahead by background threads (0: each step gathers
    its own; the batches are the same either way, see :mod:`benchlib.fl.prefetch`).
    ``precision``: the forwards' compute precision (:mod:`benchlib.fl.precision`).
    """
    model.train()
    order = torch.randperm(len(rows), generator=generator).numpy()
    plan = epoch_plan(source, rows, order, batch_size, augment_key)
    total = torch.zeros((), device=source.device)
    with Prefetcher(source, plan, depth=prefetch) as batches:
        for (batch_rows, _), (x, y) in zip(plan, batches, strict=True):
            optimizer.zero_grad(set_to_none=True)
            with compute_precision(precision, source.device):
                outputs = model(x)
            loss = loss_fn(outputs.float(), y)  # the loss in float32 whatever the forward's
            if loss_hook is not None:
                loss = loss + loss_hook(model)
            loss.backward()
            optimizer.step()
            total += loss.detach() * len(batch_rows)
    return total


@torch.inference_mode()
def predict(
    model: nn.Module,
    source: BatchSource,
    rows: np.ndarray,
    batch_size: int = 2048,
    precision: str = "fp32",
) -> torch.Tensor:
    """Model outputs for all ``rows`` in large batches (eval mode), as float32."""
    model.eval()
    if len(rows) == 0:
        return torch.empty(0, 0)
    with compute_precision(precision, source.device):
        parts = [model(x) for x, _ in source.batches(rows, batch_size)]
    return torch.cat(parts).float()
