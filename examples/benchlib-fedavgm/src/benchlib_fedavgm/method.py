"""FedAvgM: FedAvg whose server keeps a momentum of the pseudo-gradient (Hsu et al. 2019).

Each round the server takes FedAvg's new model ``m`` (weighted mean of the received models),
forms the pseudo-gradient ``d = g - m``, keeps ``v <- beta v + d`` and moves ``g <- g - eta v``.
With ``momentum = 0`` and ``server_lr = 1`` this is FedAvg exactly.
"""

from __future__ import annotations

from typing import Any

import torch

from benchlib.methods.base import StarRound
from benchlib.methods.fedavg import FedAvg


class FedAvgM(FedAvg):
    description = "star; FedAvg with server momentum"

    def __init__(self, server_lr: float, momentum: float, **fedavg: Any) -> None:
        super().__init__(**fedavg)
        self.server_lr = float(server_lr)
        self.momentum = float(momentum)
        self.velocity: torch.Tensor | None = None

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.velocity = None

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        mean = super().aggregate(global_vector, received, info).double()
        step = global_vector.double() - mean
        if self.velocity is None:
            self.velocity = step
        else:  # a checkpoint restores the velocity on the CPU: move it to this round's device
            self.velocity = self.momentum * self.velocity.to(step.device) + step
        return (global_vector.double() - self.server_lr * self.velocity).to(received.dtype)

    def state_dict(self) -> dict[str, Any]:
        # checkpoints load with map_location="cpu": keep state device-free
        return {"velocity": None if self.velocity is None else self.velocity.cpu()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.velocity = state["velocity"]

    def summary(self) -> dict[str, Any]:
        return {"server_lr": self.server_lr, "momentum": self.momentum}
