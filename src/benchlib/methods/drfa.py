"""DRFA, Distributionally Robust Federated Averaging (Deng, Kamani and Mahdavi, NeurIPS 2020).

min_w max_{lambda in simplex} sum_i lambda_i f_i(w). Each round s:

1. clients train tau local steps from w^(s); each keeps its iterate at a random step t' in
   [1, tau - 1] (the authors' ``randint(1, tau)``; here drawn per client, uniformly, by
   reservoir sampling over the steps, since the engine trains by epochs and tau is only known
   once a client has trained; tau = 1 keeps the starting model);
2. the new global model: ``paper`` - clients were sampled according to lambda (with
   replacement) and the model is the plain mean of the m returned models (draw counts as
   weights; ``draws: without_replacement``: every client once, the lambda-weighted mean);
   ``authors`` - clients sampled uniformly (without replacement) and the server step
   w <- w - sum_i lambda_i (N/m) (w - w_i) of the authors' code;
3. the snapshot w' = uniform mean of the t'-iterates; a fresh uniform set U of m clients
   (``dual_clients``, default m = ``clients_per_round``, default N: every client) evaluates
   f_i(w') (the mean training loss), v_i = (N/|U|) f_i on U, 0 elsewhere;
4. lambda <- Pi(lambda + tau gamma_s v), Euclidean simplex projection, entries <= 1e-3 raised to
   1e-3 and renormalised; gamma_s = gamma * decay^(s+1) (the authors multiply gamma by 0.9 at
   the start of every round; default gamma 0.1), tau the mean local steps of the round's
   clients (:func:`~benchlib.methods.client_graph.dual_step_size`, TFL's step too; 1 with
   ``local_step_scale: false``).

lambda starts uniform, 1/N per client (``lambda_start: uniform``, the default) or, with
``lambda_start: sizes``, proportional to the clients' training-set sizes, as the DRFA authors'
code starts (the engine passes the sizes: ``Method.set_train_sizes``); the TFL paper leaves
lambda's start open (Algorithm 1 takes "initial lambda^(0)" as an input). The two starts differ
on every TFL benchmark whose clients differ in size: PACS (each domain split into 5 equal parts,
so 334-786 images per client), eICU (hospitals), CIFAR Dir(0.1) and FeTS (institutions); the
reading ``lambda_start`` (:mod:`benchlib.grid.readings`) runs both. lambda per round is recorded in
metrics.json; a non-finite dual loss takes the round's largest finite loss
(:func:`~benchlib.methods.client_graph.finite_losses`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from benchlib.methods.base import (
    StarMethod,
    StarRound,
    TrainingContext,
    sample_clients,
)
from benchlib.methods.client_graph import (
    dual_step,
    dual_step_size,
    finite_losses,
    start_weights,
)
from benchlib.methods.tfl import draw_counts
from benchlib.primitives.errors import require
from benchlib.primitives.seeding import numpy_rng


class SnapshotHook:
    """A loss hook (adds 0) that keeps a uniformly chosen iterate among local steps 1..tau-1.

    The hook runs before each step's backward pass, so at call j the model holds the iterate
    after j steps; reservoir sampling over calls j >= 1 picks one uniformly.
    """

    def __init__(self, layout: Any, rng: np.random.Generator) -> None:
        self.layout = layout
        self.rng = rng
        self.calls = 0
        self.snapshot: torch.Tensor | None = None

    def __call__(self, model: nn.Module) -> torch.Tensor:
        j = self.calls
        self.calls += 1
        if j >= 1 and self.rng.random() < 1.0 / j:
            self.snapshot = self.layout.flatten(model)
        return torch.zeros((), device=next(model.parameters()).device)


class DRFA(StarMethod):
    description = "star; distributionally robust FedAvg: dual weights lambda by projected ascent"

    def __init__(
        self,
        *,
        gamma: float,
        gamma_decay: float,
        floor: float,
        clients_per_round: int,
        dual_clients: int,
        variant: str,
        lambda_start: str,
        local_step_scale: bool = True,
        draws: str = "with_replacement",
    ) -> None:
        self.gamma = float(gamma)
        self.gamma_decay = float(gamma_decay)
        self.floor = float(floor)
        self.clients_per_round = int(clients_per_round)
        self.dual_clients = int(dual_clients)
        self.variant = variant
        self.lambda_start = lambda_start
        self.local_step_scale = bool(local_step_scale)
        self.draws = draws
        self.train_sizes: dict[int, int] | None = None
        self._context: TrainingContext | None = None
        self._counts: dict[int, int] = {}
        self._hooks: dict[int, SnapshotHook] = {}

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self.federation: list[int] = []
        self.weights = np.zeros(0)
        self.lambda_history: list[list[float]] = []
        self.nonfinite_losses: list[dict[str, Any]] = []  # rounds with a diverged client

    def set_train_sizes(self, sizes: dict[int, int]) -> None:
        self.train_sizes = dict(sizes)

    def _start(self, clients: list[int]) -> None:
        if not self.federation:
            self.federation = list(clients)
            self.weights = start_weights(self.lambda_start, self.federation, self.train_sizes)

    def participants(self, round: int, clients: list[int], rng: np.random.Generator) -> list[int]:
        self._start(clients)
        self._hooks = {}
        m = self.clients_per_round or len(self.federation)
        if self.variant == "authors":
            chosen = sample_clients(np.ones(len(self.federation)), m, rng)
            self._counts = {self.federation[i]: 1 for i in chosen}
        elif self.draws == "without_replacement":  # every client once, weighted by lambda
            self._counts = dict.fromkeys(self.federation, 1)
        else:
            counts = draw_counts(self.weights, m, rng)
            self._counts = {self.federation[i]: int(c) for i, c in enumerate(counts) if c > 0}
        return sorted(self._counts)

    def train_client(self, context: TrainingContext, client: int, round: int) -> None:
        self._context = context
        hook = SnapshotHook(context.layout, numpy_rng(self.seed, "drfa/snapshot", round, client))
        self._hooks[client] = hook
        context.train(client, loss_hook=hook)

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        n = len(self.federation)
        if self.variant == "authors":
            lam = torch.tensor(
                [self.weights[self.federation.index(c)] for c in info.participants],
                dtype=received.dtype,
                device=received.device,
            )
            scale = lam * n / len(info.participants)
            new_global = global_vector - (scale[:, None] * (global_vector - received)).sum(dim=0)
        else:
            if self.draws == "without_replacement":
                counts = torch.tensor(
                    [self.weights[self.federation.index(c)] for c in info.participants]
                )
            else:
                counts = torch.tensor([self._counts.get(c, 1) for c in info.participants])
            w = (counts / counts.sum()).to(received.dtype).to(received.device)
            new_global = (w[:, None] * received).sum(dim=0)
        self._dual_update(global_vector, info)
        return new_global

    def _dual_update(self, global_vector: torch.Tensor, info: StarRound) -> None:
        require(self._context is not None, "drfa: no client trained before aggregation")
        assert self._context is not None
        snapshots, steps = [], []
        for c in info.participants:
            hook = self._hooks.get(c)
            snap = hook.snapshot if hook is not None else None
            snapshots.append(global_vector if snap is None else snap.to(global_vector.device))
            steps.append(hook.calls if hook is not None else 1)
        snapshot = torch.stack(snapshots).mean(dim=0)
        n = len(self.federation)
        # |U| = m, the clients sampled per round (DRFA's Algorithm: U holds m clients), not
        # the distinct clients drawn: with draws by lambda, those shrink to 1 as lambda
        # concentrates and N / |U| would then put all the mass on one random client
        size = min(self.dual_clients or self.clients_per_round or n, n)
        rng = numpy_rng(self.seed, "drfa/dual", info.round)
        chosen = sample_clients(np.ones(n), size, rng)
        ids = [self.federation[i] for i in chosen]
        raw = [self._context.evaluate_loss(c, snapshot, "train") for c in ids]
        losses, bad = finite_losses(np.array(raw), ids, info.round, "drfa")
        if bad:
            self.nonfinite_losses.append({"round": info.round, "clients": bad})
        v = np.zeros(n)
        v[chosen] = (n / size) * losses
        tau = float(np.mean(steps)) if self.local_step_scale else 1.0
        step = dual_step_size(self.gamma, self.gamma_decay, info.round, tau)
        self.weights = dual_step(self.weights, v, step, floor=self.floor)
        self.lambda_history.append([round(float(x), 6) for x in self.weights])

    def state_dict(self) -> dict[str, Any]:
        return {
            "federation": list(self.federation),
            "weights": torch.from_numpy(self.weights.copy()),
            "lambda_history": self.lambda_history,
            "nonfinite_losses": self.nonfinite_losses,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.federation = list(state["federation"])
        self.weights = state["weights"].numpy().copy()
        self.lambda_history = list(state["lambda_history"])
        self.nonfinite_losses = list(state.get("nonfinite_losses", []))

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"federation": list(self.federation), "lambda": self.lambda_history}
        if self.nonfinite_losses:  # rounds whose dual step met a diverged client
            out["nonfinite_losses"] = self.nonfinite_losses
        return out
