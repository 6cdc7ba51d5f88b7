"""Malfunctions applied to the transmitted copy of a model (never the client's own model).

- ``ana``: additive noise w' = w (1 + (s/100) eps), eps ~ N(0, 1) per element (LIGHTYEAR v1
  appendix B; s = 120.5 FEMNIST, 1.5 Camelyon17);
- ``sfa``: sign flip w' = -w;
- ``random``: a freshly initialised model, new every round;
- ``dynamic``: each malfunctioning client draws one of the three each round.

All randomness comes from streams keyed by (seed, round, client), never by method, so every method
faces the same malfunction schedule and noise. Parameters come from the dataset's ``malfunction``
section, one dict per malfunction name (``ana: {scale: 120.5}``); their names are declared in
:data:`benchlib.declarations.malfunctions.MALFUNCTIONS`.

Diagnostic, not a paper setting: ``start_round: N`` in the ``malfunction`` section keeps the
first N rounds (0..N-1) clean (the malfunctioning clients send their true model, the schedule
records ``none``) and malfunctions from round N on, with the noise and draws the same rounds
would have without it. It shows whether a method resists malfunctions once the clients' models
are informative (docs/papers/lightyear.md). Default 0: from the first round, as the paper.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from benchlib.declarations.malfunctions import MALFUNCTIONS
from benchlib.declarations.registry import import_object
from benchlib.fl.rng import torch_generator
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.seeding import derive_seed, numpy_rng


@dataclass(frozen=True)
class MalfunctionContext:
    """What a malfunction may use: keyed randomness and a factory for fresh models."""

    seed: int
    round: int
    client: int
    fresh_vector: Callable[[int], torch.Tensor]  # seed -> flat vector of a new initialisation
    # the cell's malfunction section, defaults filled
    # (benchlib.declarations.malfunctions.malfunction_settings):
    # ``start_round`` and one parameter mapping per malfunction that has parameters
    params: dict[str, Any] = field(default_factory=dict)

    def param(self, malfunction: str, name: str) -> float:
        return float(self.params[malfunction][name])

    @property
    def start_round(self) -> int:
        """The first round that malfunctions (earlier rounds are clean)."""
        return int(self.params[START_ROUND])


Malfunction = Callable[[torch.Tensor, MalfunctionContext], tuple[torch.Tensor, str]]
START_ROUND = "start_round"
BASIC = ("ana", "sfa", "random")


def get_malfunction(name: str) -> Malfunction:
    """The malfunction ``name``; before the context's ``start_round`` it sends the model clean
    and reports ``none``."""
    apply = import_object(MALFUNCTIONS.get(name).implementation, f"malfunction {name!r}")

    def scheduled(vector: torch.Tensor, ctx: MalfunctionContext) -> tuple[torch.Tensor, str]:
        if ctx.round < ctx.start_round:
            return vector, "none"
        return apply(vector, ctx)

    return scheduled


def no_malfunction(vector: torch.Tensor, ctx: MalfunctionContext) -> tuple[torch.Tensor, str]:
    return vector, "none"


def additive_noise(vector: torch.Tensor, ctx: MalfunctionContext) -> tuple[torch.Tensor, str]:
    generator = torch_generator(ctx.seed, "malfunction/ana", ctx.round, ctx.client)
    eps = torch.randn(vector.shape, generator=generator, dtype=torch.float32)
    scale = ctx.param("ana", "scale")
    return vector * (1.0 + (scale / 100.0) * eps.to(vector.device)), "ana"


def sign_flip(vector: torch.Tensor, ctx: MalfunctionContext) -> tuple[torch.Tensor, str]:
    return -vector, "sfa"


def random_weights(vector: torch.Tensor, ctx: MalfunctionContext) -> tuple[torch.Tensor, str]:
    fresh = ctx.fresh_vector(derive_seed(ctx.seed, "malfunction/random", ctx.round, ctx.client))
    return fresh.to(vector.device), "random"


def dynamic(vector: torch.Tensor, ctx: MalfunctionContext) -> tuple[torch.Tensor, str]:
    choice = BASIC[
        int(numpy_rng(ctx.seed, "malfunction/dynamic", ctx.round, ctx.client).integers(3))
    ]
    return get_malfunction(choice)(vector, ctx)


def _random_placement(num_clients: int, k: int, seed: int) -> list[int]:
    rng = numpy_rng(seed, "malicious", k)
    return sorted(int(c) for c in rng.choice(num_clients, size=k, replace=False))


_PLACEMENTS: dict[str, Callable[[int, int, int], list[int]]] = {
    "first": lambda n, k, seed: list(range(k)),
    "last": lambda n, k, seed: list(range(n - k, n)),
    "random": _random_placement,
}


def malicious_clients(num_clients: int, k: int, placement: str, seed: int) -> list[int]:
    """Which k clients malfunction: ``first`` (0..k-1, the default), ``last`` or ``random``."""
    if not 0 <= k < num_clients:
        raise BenchlibError(
            f"number of malfunctioning clients k={k} must be in 0..{num_clients - 1}"
        )
    if placement not in _PLACEMENTS:
        raise BenchlibError(
            f"unknown malfunction placement {placement!r}; choose one of: {', '.join(_PLACEMENTS)}"
        )
    return _PLACEMENTS[placement](num_clients, k, seed)


@dataclass(frozen=True)
class MalfunctionPlan:
    """A cell's malfunction: which federation clients malfunction, with which parameters, and
    what they transmit each round."""

    name: str
    malicious: list[int]
    params: dict[str, Any]  # per-malfunction parameter dicts, plus the optional start_round
    apply: Malfunction

    @classmethod
    def of(
        cls, name: str, settings: dict[str, Any], k: int, federation: list[int], seed: int
    ) -> MalfunctionPlan:
        """From the cell's malfunction name and ``malfunction_params`` (placement + params)."""
        apply = get_malfunction(name)
        params = dict(settings)
        placement = str(params.pop("placement"))
        positions = malicious_clients(len(federation), k, placement, seed)
        malicious = [federation[i] for i in positions]
        if name == "none" and malicious:
            raise BenchlibError("malfunction 'none' needs k = 0")
        return cls(name, malicious, params, apply)

    def transmit(
        self,
        seed: int,
        round_index: int,
        trained: dict[int, torch.Tensor],
        fresh_vector: Callable[[int], torch.Tensor],
    ) -> tuple[dict[int, torch.Tensor], dict[str, str]]:
        """The vectors the participants send (malfunctioning ones corrupted; their own models
        untouched) and which malfunction each malfunctioning participant applied."""
        sent = dict(trained)
        applied: dict[str, str] = {}
        for client in self.malicious:
            if client not in trained:
                continue
            ctx = MalfunctionContext(seed, round_index, client, fresh_vector, self.params)
            sent[client], applied[str(client)] = self.apply(trained[client], ctx)
        return sent, applied
