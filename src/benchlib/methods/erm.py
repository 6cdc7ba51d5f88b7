"""``erm``: centralised empirical risk minimisation, the Centralized column of TFL Tables 2-4.

One model is trained on the pooled training rows of every federation client; held-out clients
never train. A round is ``local_epochs`` epochs over the pooled rows (sorted, then shuffled per
epoch by a keyed generator), with the clients' batch size, loss and optimizer settings. Every
client, federation and held-out, is scored with that one model.

How it runs in the engine: a star method whose participants are all federation clients (all
their rows train), but the training happens once per round, on the first participant's working
model (which the engine has just loaded with the global model) and its optimizer (kept across
rounds, as one centralised optimizer would be, unless ``persist_optimizer`` is false); the
other participants train nothing. :meth:`Erm.aggregate` returns the trained model and ignores
what was "transmitted": nothing is communicated, so a malfunction has nothing to corrupt.
Because ERM overrides ``train_client``, the engine never trains it batched (fl/batched.py).
"""

from __future__ import annotations

import numpy as np
import torch

from benchlib.methods.base import StarMethod, StarRound, TrainingContext
from benchlib.primitives.errors import require

STREAM = "erm"  # the keyed random streams of the pooled training: erm/shuffle, erm/dropout


def pooled_rows(context: TrainingContext, clients: list[int]) -> np.ndarray:
    """The store rows of the ``clients``' training subsets, together and sorted."""
    return np.sort(np.concatenate([context.train_rows(c) for c in clients]))


class Erm(StarMethod):
    description = "centralised: one model trained on the pooled data of all federation clients"

    def __init__(self) -> None:
        self.federation: list[int] = []
        self._trainer: int | None = None
        self._trained: torch.Tensor | None = None

    def participants(self, round: int, clients: list[int], rng: np.random.Generator) -> list[int]:
        self.federation = sorted(clients)
        self._trainer, self._trained = None, None
        return list(self.federation)

    def train_client(self, context: TrainingContext, client: int, round: int) -> None:
        """The first participant of the round trains on the pooled rows; the others nothing."""
        if self._trainer is not None:
            return
        self._trainer = client
        # keyed streams erm/shuffle, erm/dropout: (seed, stream, round, client, epoch)
        context.train(client, stream=STREAM, rows=pooled_rows(context, self.federation))
        self._trained = context.layout.flatten(context.models[client])

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        require(self._trained is not None, "erm: aggregate called before the round's training")
        assert self._trained is not None
        return self._trained.to(device=global_vector.device, dtype=global_vector.dtype)
