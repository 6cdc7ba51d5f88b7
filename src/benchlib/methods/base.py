"""The method interface, and building a method from its declaration.

A method is a class that a declaration names (:mod:`benchlib.methods.catalog` for the built-in
ones, a plugin's declarations module for others; see docs/guide/plugins.md). The engine builds
it with the config's parameters (``Method(**params)``, validated against the declaration and
every default filled) and calls it each round:

- :class:`StarMethod` sees the server's view: the current global vector and the stacked vectors
  the participating clients transmitted (some possibly corrupted), and returns the new global
  vector;
- :class:`P2PMethod` sees one client's view (:class:`PeerView`): its own freshly trained vector,
  the vectors its peers transmitted, and a :class:`PeerEvaluator` on its own validation set; it
  returns the client's new vector and the peers it selected.

Hooks with defaults, overridden by methods that need them:

- :meth:`Method.train_client` - local training (FedProx's proximal term, Ditto's personal model);
- :meth:`Method.client_report` - a report each client sends with its model (FedAgain's benchmark
  error); star methods receive them in :attr:`StarRound.reports`;
- :attr:`Method.private_prefixes` - parameters that stay with each client and are never
  transmitted or averaged (FedSR's local prior);
- :meth:`Method.participants` - which clients take part in a round (partial participation,
  weighted client sampling: DRFA, TFL);
- :meth:`Method.held_out_vector` - the model scored on held-out clients that never train.

A transmitted vector holds a model's float buffers (BatchNorm running statistics) besides its
parameters; a method that measures how models differ (FedAgain's divergence, TFL's similarity
graph) reads only the parameter entries, :func:`parameter_mask` of its training context.

Methods never import the engine: what they may use of local training is the
:class:`TrainingContext` protocol below, which the engine implements.

What an author must know:

- :meth:`Method.setup` runs once before round 0, and again before a checkpoint's state is
  loaded: reset cross-round state there.
- :meth:`Method.state_dict` is saved with every round's checkpoint; checkpoints load with
  ``map_location="cpu"`` and ``weights_only=True``. Return CPU tensors, numbers, lists or
  strings, and move tensors to the round's device when using them (a method that keeps its
  state on the GPU would crash on resume).
- ``received`` (star) and the peers' vectors (P2P) live in buffers the engine reuses next round:
  copy what you keep. The global vector is never modified in place: a method may keep it.
- Local training runs batched on a GPU (``fl/batched.py``) when a method changes it only
  through :meth:`Method.proximal_term`, :meth:`Method.before_training` and
  :meth:`Method.after_training`; overriding :meth:`Method.train_client` or setting
  ``private_prefixes`` makes the cell train its clients one after another.
- Randomness comes from generators seeded from ``seed`` (:mod:`benchlib.primitives.seeding`), never
from
  global RNGs, so a cell is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
import torch
from torch import nn

from benchlib.declarations.registry import import_object
from benchlib.declarations.settings import TrainingSettings
from benchlib.methods.catalog import METHODS
from benchlib.primitives.errors import BenchlibError
from benchlib.tasks.base import PeerScoring, Task

LossHook = Callable[[nn.Module], torch.Tensor]


class VectorLayout(Protocol):
    """Converts a model's floating state to and from one flat vector."""

    names: tuple[str, ...]  # state-dict entries in vector order
    shapes: tuple[torch.Size, ...]
    numels: tuple[int, ...]

    def flatten(self, model: nn.Module) -> torch.Tensor: ...

    def load(self, model: nn.Module, vector: torch.Tensor) -> None: ...

    def parameter_mask(self, model: nn.Module) -> torch.Tensor:
        """Bool [size]: True at ``model``'s parameter entries, False at float buffers."""
        ...


def proximal_hook(
    model: nn.Module, anchor: torch.Tensor, layout: VectorLayout, coeff: float
) -> LossHook:
    """A loss hook ``coeff/2 * sum_p ||p - anchor_p||^2`` over ``model``'s parameters.

    ``anchor`` is a flat vector in ``layout`` (parameters and float buffers); only the entries of
    trainable parameters enter the term, buffers such as BatchNorm statistics are not optimised.
    """
    params = dict(model.named_parameters())
    pairs: list[tuple[nn.Parameter, torch.Tensor]] = []
    offset = 0
    for name, shape, numel in zip(layout.names, layout.shapes, layout.numels, strict=True):
        if name in params:
            param = params[name]
            target = anchor[offset : offset + numel].detach().view(shape)
            pairs.append((param, target.to(device=param.device, dtype=param.dtype)))
        offset += numel

    def hook(_: nn.Module) -> torch.Tensor:
        total = sum(((param - target) ** 2).sum() for param, target in pairs)
        return 0.5 * coeff * total

    return hook


class TrainingContext(Protocol):
    """What a method may use of one round's local training (implemented by the engine)."""

    models: list[nn.Module]  # each client's working model
    settings: TrainingSettings  # the cell's training settings
    layout: VectorLayout
    global_vector: torch.Tensor | None  # star: this round's global model; P2P: None
    loss_fn: nn.Module  # the task's training loss

    def train(
        self,
        client: int,
        model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        loss_hook: LossHook | None = None,
        stream: str = "train",
        loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        rows: np.ndarray | None = None,
    ) -> None:
        """Run the configured local epochs on ``model`` (default the client's working model);
        ``loss_fn(outputs, targets)``, if given, replaces the task loss; ``rows`` (store rows),
        if given, replace the client's training rows (ERM's pooled data)."""
        ...

    def train_rows(self, client: int) -> np.ndarray:
        """The store rows of ``client``'s training subset."""
        ...

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer: ...

    def evaluate(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        """The task's primary metric of ``vector`` on the client's ``subset``."""
        ...

    def evaluate_loss(self, client: int, vector: torch.Tensor, subset: str = "val") -> float:
        """The mean training loss of ``vector`` on the client's ``subset`` (eval mode)."""
        ...


def parameter_mask(context: TrainingContext, client: int) -> torch.Tensor:
    """Bool [d] over the transmitted vector: True at the entries of model parameters, False at
    float buffers such as BatchNorm running statistics (every client trains the same
    architecture, so any client's model gives the same mask)."""
    return context.layout.parameter_mask(context.models[client])


class PeerEvaluator:
    """Evaluates flat parameter vectors on one client's validation set.

    ``logits(vector)`` is the model's raw output and ``labels`` the validation targets;
    ``scoring(vector)`` is the task's peer-scoring view of a model (per-sample or per-pixel class
    scores, matching labels, and the task's own quality term such as Dice), which methods that
    score peers (LIGHTYEAR) use so that they work for every task.
    """

    def __init__(
        self,
        predict: Callable[[torch.Tensor], torch.Tensor],
        labels: torch.Tensor,
        view: Callable[[torch.Tensor], PeerScoring] | None = None,
        predict_many: Callable[[torch.Tensor], torch.Tensor] | None = None,
        view_of_outputs: Callable[[torch.Tensor], PeerScoring] | None = None,
    ) -> None:
        self._predict = predict
        self.labels = labels
        self._view = view
        self._predict_many = predict_many
        self._view_of_outputs = view_of_outputs

    def logits(self, vector: torch.Tensor) -> torch.Tensor:
        """The model output of ``vector`` on the validation inputs."""
        return self._predict(vector)

    def scoring(self, vector: torch.Tensor) -> PeerScoring:
        """The task's peer-scoring view of ``vector`` (default: logits vs. labels)."""
        if self._view is None:
            return PeerScoring(logits=self.logits(vector), labels=self.labels)
        return self._view(vector)

    def scoring_many(self, vectors: Sequence[torch.Tensor]) -> list[PeerScoring]:
        """:meth:`scoring` of each of ``vectors`` (P vectors of size d, or one [P, d] tensor);
        the engine may evaluate all P models in one batched pass (same values up to float
        rounding). One at a time, nothing is stacked: on a CPU a [P, d] copy per client per
        round is a noticeable share of a P2P round."""
        if self._predict_many is None:
            return [self.scoring(vector) for vector in vectors]
        stacked = vectors if isinstance(vectors, torch.Tensor) else torch.stack(list(vectors))
        outputs = self._predict_many(stacked)
        if self._view_of_outputs is None:
            return [PeerScoring(logits=o, labels=self.labels) for o in outputs]
        return [self._view_of_outputs(o) for o in outputs]


@dataclass
class PeerView:
    """One P2P client's view in one round."""

    round: int
    client: int
    own: torch.Tensor  # the client's vector right after this round's local training
    peers: list[int]
    # row r from peers[r] (possibly corrupted): a [len(peers), d] tensor, or (from the engine)
    # one vector per peer, shared with the other clients' views - read-only either way
    received: torch.Tensor | Sequence[torch.Tensor]
    evaluator: PeerEvaluator

    def received_stack(self) -> torch.Tensor:
        """The received vectors as one [len(peers), d] tensor (a copy when they came one by
        one; row-wise access through ``received[r]`` needs none)."""
        if isinstance(self.received, torch.Tensor):
            return self.received
        return torch.stack(list(self.received))


@dataclass
class StarRound:
    """What a star method sees in one round, besides the vectors."""

    round: int
    num_rounds: int
    train_sizes: torch.Tensor  # samples per participating client
    batch_counts: torch.Tensor  # local batches per participating client
    participants: list[int] = field(default_factory=list)  # row r of `received` = client
    reports: list[dict[str, Any] | None] = field(default_factory=list)  # per participant


@dataclass
class P2PResult:
    """A P2P method's answer for one client: new vector, selected peers, optional scores."""

    vector: torch.Tensor
    selected: list[int]
    scores: dict[int, float] = field(default_factory=dict)


def sample_clients(
    weights: Sequence[float], count: int, rng: np.random.Generator, replace: bool = False
) -> list[int]:
    """``count`` client ids drawn with probability proportional to ``weights`` (sorted)."""
    p = np.asarray(weights, dtype=np.float64)
    p = p / p.sum()
    return sorted(int(c) for c in rng.choice(len(p), size=count, replace=replace, p=p))


class Method:
    """Base class of all methods. Its declaration (:mod:`benchlib.methods.catalog`, or a
    plugin's) holds the name, topology and parameters; :func:`build_method` sets ``name``."""

    name: str = ""
    topology: ClassVar[str]  # "star" or "p2p"
    description: ClassVar[str] = ""
    private_prefixes: ClassVar[tuple[str, ...]] = ()
    # how clients start when the config leaves model.init unset (shared | per_client)
    model_init: str = "shared"

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        """Called once before round 0 (and before a checkpoint's state is loaded)."""
        self.num_clients = num_clients
        self.num_rounds = num_rounds
        self.seed = seed

    def set_train_sizes(self, sizes: dict[int, int]) -> None:
        """Called once after :meth:`setup` with every client's number of training rows (client
        id -> rows), for a method whose start depends on them (DRFA's and TFL's
        size-proportional lambda); the default ignores them."""

    def build_model(
        self, build: Callable[[int], nn.Module], num_outputs: int, task: Task | None = None
    ) -> nn.Module:
        """The model every client trains: ``build(n)`` makes the configured model with ``n``
        outputs for the cell's ``task`` (default ``build(num_outputs)``; FedSR wraps it in its
        probabilistic head, per pixel for a segmentation task)."""
        return build(num_outputs)

    def participants(self, round: int, clients: list[int], rng: np.random.Generator) -> list[int]:
        """The clients that train and transmit in ``round`` (default: all of ``clients``)."""
        return list(clients)

    def train_client(self, context: TrainingContext, client: int, round: int) -> None:
        """Local training of ``client`` in ``round``: :meth:`before_training`, the local
        epochs (pulled towards :meth:`proximal_term`'s anchor when it names one), then
        :meth:`after_training`. A method that changes only these hooks keeps batched training
        on a GPU (``fl/batched.py``); one that overrides ``train_client`` itself makes the cell
        train its clients one after another."""
        self.before_training(context, client, round)
        pull = self.proximal_term(context, client)
        hook = None
        if pull is not None:
            hook = proximal_hook(context.models[client], pull[1], context.layout, pull[0])
        context.train(client, loss_hook=hook)
        self.after_training(context, client, round)

    def before_training(self, context: TrainingContext, client: int, round: int) -> None:
        """Called before ``client``'s local epochs (e.g. load its cluster's model); default
        nothing."""

    def proximal_term(
        self, context: TrainingContext, client: int
    ) -> tuple[float, torch.Tensor] | None:
        """``(c, anchor)``: the local epochs minimise loss + c/2 ||w - anchor||^2 over the
        trainable parameters (``anchor`` a flat vector in ``context.layout``); default
        ``None``, no pull."""
        return None

    def after_training(self, context: TrainingContext, client: int, round: int) -> None:
        """Called after ``client``'s local epochs (e.g. train a personal model); default
        nothing."""

    def client_report(
        self, context: TrainingContext, client: int, round: int
    ) -> dict[str, Any] | None:
        """What ``client`` sends beside its model (default nothing)."""
        return None

    def held_out_vector(
        self, global_vector: torch.Tensor, client_vectors: list[torch.Tensor]
    ) -> torch.Tensor:
        """The model scored on held-out clients: star the global model, P2P the clients' mean."""
        if self.topology == "star":
            return global_vector
        return torch.stack(client_vectors).mean(dim=0)

    def state_dict(self) -> dict[str, Any]:
        """Cross-round state to checkpoint (empty for stateless methods)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned."""

    def summary(self) -> dict[str, Any]:
        """Method-specific facts to record in metrics.json (e.g. flagged clients)."""
        return {}


class StarMethod(Method):
    """Server-side aggregation over all transmitted vectors."""

    topology = "star"

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        """The next global model from the round's ``received`` vectors [n, d].

        ``received`` lives in memory the engine reuses next round: copy what you keep across
        rounds (returning a row of it is fine; the engine copies such a result).
        """
        raise NotImplementedError

    def evaluation_vector(self, client: int, global_vector: torch.Tensor) -> torch.Tensor:
        """The vector scored for ``client`` (the global model; Ditto: the personal one)."""
        return global_vector


class P2PMethod(Method):
    """Client-side aggregation over the peers' transmitted vectors."""

    topology = "p2p"

    @property
    def model_init(self) -> str:  # type: ignore[override]
        """The authors' P2P code starts every client from its own random model."""
        return "per_client" if getattr(self, "variant", "paper") == "authors" else "shared"

    def aggregate_client(self, view: PeerView) -> P2PResult:
        raise NotImplementedError


def method_names() -> list[str]:
    """Every declared method (built-in and plugins')."""
    return METHODS.names()


def get_method_class(name: str) -> type[Method]:
    """The implementation of method ``name``: the class its declaration names (imported on
    first use)."""
    declared = METHODS.get(name)
    cls = import_object(declared.implementation, f"method {name!r}")
    if not (isinstance(cls, type) and issubclass(cls, Method)):
        raise BenchlibError(
            f"method {name!r}: {declared.implementation} is not a Method subclass "
            "(derive it from benchlib.methods.base.StarMethod or P2PMethod)"
        )
    if cls.topology != declared.topology:
        raise BenchlibError(
            f"method {name!r} is declared {declared.topology} but {declared.implementation} is "
            f"a {cls.topology} method"
        )
    return cls


def build_method(name: str, params: Mapping[str, Any]) -> Method:
    """Instantiate method ``name`` with its filled parameters (a resolved spec's: every declared
    one; nothing is checked again); the instance's ``name`` is the declared one."""
    method = get_method_class(name)(**params)
    method.name = name
    return method
