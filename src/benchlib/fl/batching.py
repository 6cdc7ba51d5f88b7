"""Whether a cell's clients train batched (``training.client_batching``), and the methods'
proximal pulls in the batched trainer's layout (see :mod:`benchlib.fl.batched`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import nn

from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.batched import BatchedClients, why_not_batched
from benchlib.methods.base import Method, TrainingContext
from benchlib.models.vectors import ParamLayout

LOG = logging.getLogger("benchlib")


def batched_clients(
    training: TrainingSettings,
    device: torch.device,
    models: list[nn.Module],
    optimizers: list[torch.optim.Optimizer],
    loss_fn: nn.Module,
    method: Method,
    precision: str,
) -> BatchedClients | None:
    """The lock-step trainer when the clients can train batched, else None (logged why).

    ``training.client_batching``: ``auto`` (default) batches on a GPU when possible, ``on``
    batches wherever possible (also on CPU), ``off`` never.
    """
    choice = training.client_batching
    if choice == "off" or (choice == "auto" and device.type != "cuda"):
        return None
    reason = why_not_batched(models, optimizers, loss_fn, method.private_prefixes)
    if reason is None and type(method).train_client is not Method.train_client:
        reason = f"method {method.name} trains its clients its own way"
    if reason is not None:
        LOG.info("clients train one after another: %s", reason)
        return None
    LOG.info("clients train batched (lock-step, one vmap over %d models)", len(models))
    graphs = training.cuda_graphs
    return BatchedClients(models[0], loss_fn, cuda_graphs=graphs, precision=precision)


def proximal_rows(
    method: Method,
    context: TrainingContext,
    participants: Sequence[int],
    model: nn.Module,
    layout: ParamLayout,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The method's proximal pulls for batched training: coefficients [C, 1] and anchors
    [C, D] in the batched parameter order (``None`` when no client is pulled)."""
    pulls = [method.proximal_term(context, client) for client in participants]
    if all(pull is None for pull in pulls):
        return None
    zero = torch.zeros(layout.size, device=device)
    anchors = torch.stack(
        [layout.parameter_entries(model, zero if p is None else p[1].to(device)) for p in pulls]
    )
    coefficients = torch.tensor([[0.0 if p is None else float(p[0])] for p in pulls], device=device)
    return coefficients, anchors
