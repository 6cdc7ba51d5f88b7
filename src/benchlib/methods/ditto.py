"""Ditto (Li, Hu, Beirami & Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021).

Sec. 3, Eq. (2) and Algorithm 1: besides the global model w (trained and averaged as in FedAvg),
every client k keeps a personal model v_k that minimises

    h_k(v_k; w^t) = F_k(v_k) + lambda/2 ||v_k - w^t||^2,

w^t being the global model the client received this round. Each round the client first trains its
copy of w^t (sent to the server, averaged weighted by training-set size), then trains v_k for the
same local epochs with the proximal term (parameters only, as in FedProx). v_k starts as the
initial global model and, with its own optimizer state, persists across rounds; the personal
model is what is evaluated. Default lambda = 0.5 (the LIGHTYEAR authors' value; the Ditto paper
tunes lambda per dataset).

``variant: authors`` is the LIGHTYEAR authors' code (training/DittoTrainer.py + FedAvg server):
the personal model is trained but never evaluated, saved or sent, so it cannot affect any
result and is not trained here; the global model is evaluated and the server weights by the
number of local batches.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from benchlib.methods.base import TrainingContext, proximal_hook
from benchlib.methods.fedavg import FedAvg


class Ditto(FedAvg):
    description = "star; FedAvg global model + per-client personal models pulled towards it"

    def __init__(self, *, lam: float, variant: str) -> None:
        super().__init__(weighting="samples" if variant == "paper" else "batches", gamma=1.0)
        self.variant = variant
        self.lam = float(lam)

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.personal: list[torch.Tensor | None] = [None] * num_clients
        self.optimizer_states: list[dict[str, Any] | None] = [None] * num_clients

    def after_training(self, context: TrainingContext, client: int, round: int) -> None:
        if self.variant == "authors" or context.global_vector is None:
            return
        anchor = context.global_vector  # w^t, the model received this round
        model = copy.deepcopy(context.models[client])
        start = self.personal[client]
        context.layout.load(model, anchor if start is None else start)
        assert context.make_optimizer is not None
        optimizer = context.make_optimizer(model)
        saved = self.optimizer_states[client]
        if saved is not None and context.settings.persist_optimizer:
            optimizer.load_state_dict(saved)
        hook = proximal_hook(model, anchor, context.layout, self.lam)
        context.train(client, model=model, optimizer=optimizer, loss_hook=hook, stream="ditto")
        self.personal[client] = context.layout.flatten(model)
        self.optimizer_states[client] = copy.deepcopy(optimizer.state_dict())

    def evaluation_vector(self, client: int, global_vector: torch.Tensor) -> torch.Tensor:
        personal = self.personal[client] if self.variant == "paper" else None
        return global_vector if personal is None else personal

    def state_dict(self) -> dict[str, Any]:
        return {
            "personal": [None if v is None else v.detach().cpu() for v in self.personal],
            "optimizers": self.optimizer_states,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.personal = list(state["personal"])
        self.optimizer_states = list(state["optimizers"])
