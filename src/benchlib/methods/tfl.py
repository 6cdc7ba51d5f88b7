"""TFL, Topology-aware Federated Learning (Ma, Li and Peng, "Beyond the Federation: Topology-aware
Federated Learning for Generalization to Unseen Clients", ICML 2024), Algorithm 1.

Per round t (0-based here; the paper counts from 1):

1. the server samples m clients according to lambda (with replacement; a client drawn twice
   counts twice) and the drawn clients train from the global model;
2. the new global model is the mean of the m returned models (draw counts as weights);
3. every f rounds (when (t + 1) % f == 0) client topology learning (Eq. 4): pairwise model
   similarity (dot product by default), min-max scaled to [0, 1], epsilon-graph; the prior is
   p = softmax(centrality) (betweenness by default: the paper's unnormalised
   c_k = sum_{s != k != t} sigma_st(k) / sigma_st, and every other centrality on that pair
   scale; ``normalized_betweenness`` puts every centrality in networkx's normalised form
   instead, betweenness divided by (n-1)(n-2)/2: see :mod:`~benchlib.methods.client_graph`);
4. the KL-regularised dual ascent (Eq. 6-7): lambda <- Pi(lambda + eta_t (l(theta^{t+1}) -
   q (log(lambda / p) + 1))), l_k the training loss of the new global model on client k, then
   the DRFA authors' floor at 1e-3. A non-finite l_k (the model diverged on client k) takes the
   round's largest finite loss, logged and recorded (``nonfinite_losses``); lambda starts
   uniform or, with ``lambda_start: sizes``, proportional to the clients' training-set sizes
   (the paper leaves lambda^(0) open; see :mod:`~benchlib.methods.drfa`).

The graph uses each client's latest transmitted model (only the drawn clients train in a round;
a client never drawn yet is left out of the graph and gets the smallest prior mass). A model's
node embedding is its parameters: the transmitted vector's float buffers (BatchNorm running
statistics) are left out (:func:`~benchlib.methods.base.parameter_mask`). Variants:
``clusters`` > 0 is the KMeans-clustered topology (Table 6), ``embedding_last`` > 0 uses only the
model's last parameter tensors (e.g. 2 = the last layer's weight and bias; Table 7). The dual step
size is DRFA's (TFL states none): eta_t = tau * lr_lambda * lr_decay^(t+1), tau the mean local
steps of the round's clients, so that TFL with q = 0 (or a uniform prior at a uniform lambda)
takes exactly DRFA's lambda step on the same losses; ``local_step_scale: false`` drops tau. Each
topology update and lambda per round are recorded in metrics.json (``method_summary``), and the
raw pairwise similarities of the clients' final models under every measure (``similarities``,
TFL Figure 4).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from benchlib.methods.base import (
    StarMethod,
    StarRound,
    TrainingContext,
    parameter_mask,
)
from benchlib.methods.client_graph import (
    SIMILARITIES,
    StepCounter,
    dual_step,
    dual_step_size,
    finite_losses,
    learn_topology,
    similarity_matrix,
    start_weights,
)
from benchlib.primitives.errors import require


def draw_counts(weights: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """How often each position is drawn in ``draws`` draws with replacement ~ ``weights``."""
    p = weights / weights.sum()
    picks = rng.choice(len(p), size=draws, replace=True, p=p)
    return np.bincount(picks, minlength=len(p))


def embedding_columns(mask: torch.Tensor, numels: tuple[int, ...], last: int = 0) -> torch.Tensor:
    """Bool [d]: the entries of a flat vector that form a model's node embedding.

    ``mask`` marks the parameter entries of the vector, whose state tensors have ``numels``
    entries each; ``last`` > 0 keeps only the last ``last`` parameter tensors (the partial
    embedding), else every parameter entry."""
    if last <= 0:
        return mask.clone()
    starts = np.concatenate([[0], np.cumsum(numels)[:-1]]).astype(int)
    tensors = [i for i, n in enumerate(numels) if n > 0 and bool(mask[starts[i]])]
    columns = torch.zeros_like(mask)
    for i in tensors[-last:]:
        columns[starts[i] : starts[i] + numels[i]] = True
    return columns


class TFL(StarMethod):
    description = "star; topology-regularised DRO: clients sampled by lambda, prior from centrality"

    def __init__(
        self,
        *,
        similarity: str,
        epsilon: float,
        centrality: str,
        q: float,
        update_every: int,
        lr_lambda: float,
        lr_decay: float,
        floor: float,
        clients_per_round: int,
        clusters: int,
        embedding_last: int,
        loss_subset: str,
        normalized_betweenness: bool,
        local_step_scale: bool,
        lambda_start: str,
        embedding: str = "latest",
        scaling: str = "minmax",
        draws: str = "with_replacement",
        ordered_pairs: bool = False,
    ) -> None:
        self.similarity = similarity
        self.epsilon = float(epsilon)
        self.centrality = centrality
        self.q = float(q)
        self.update_every = int(update_every)
        self.lr_lambda = float(lr_lambda)
        self.lr_decay = float(lr_decay)
        self.floor = float(floor)
        self.clients_per_round = int(clients_per_round)
        self.clusters = int(clusters)
        self.embedding_last = int(embedding_last)
        self.loss_subset = loss_subset
        self.normalized_betweenness = bool(normalized_betweenness)
        self.local_step_scale = bool(local_step_scale)
        self.lambda_start = lambda_start
        self.embedding_age = embedding
        self.scaling = scaling
        self.draws = draws
        self.ordered_pairs = bool(ordered_pairs)
        self.train_sizes: dict[int, int] | None = None
        self._steps: dict[int, StepCounter] = {}
        self._mix: dict[int, float] = {}  # client -> lambda_k (draws without replacement)
        self._extra: set[int] = set()  # clients trained for the graph only (embedding current)
        self._context: TrainingContext | None = None
        self._counts: dict[int, int] = {}
        self._columns: torch.Tensor | None = None  # bool [d]: the node-embedding entries

    def setup(self, num_clients: int, num_rounds: int, seed: int) -> None:
        super().setup(num_clients, num_rounds, seed)
        self._columns = None
        self.federation: list[int] = []
        self.weights = np.zeros(0)
        self.prior = np.zeros(0)
        self.memory: torch.Tensor | None = None
        self.seen = np.zeros(0, dtype=bool)
        self.last_drawn = np.zeros(0, dtype=int)  # per client: the last round it was drawn
        self.lambda_history: list[list[float]] = []
        self.topology_history: list[dict[str, Any]] = []
        self.nonfinite_losses: list[dict[str, Any]] = []  # rounds with a diverged client

    def set_train_sizes(self, sizes: dict[int, int]) -> None:
        self.train_sizes = dict(sizes)

    def _start(self, clients: list[int]) -> None:
        if not self.federation:
            self.federation = list(clients)
            k = len(clients)
            self.weights = start_weights(self.lambda_start, self.federation, self.train_sizes)
            self.prior = np.full(k, 1.0 / k)
            self.seen = np.zeros(k, dtype=bool)
            self.last_drawn = np.full(k, -1, dtype=int)

    # ------------------------------------------------------------------ round hooks
    def participants(self, round: int, clients: list[int], rng: np.random.Generator) -> list[int]:
        """The drawn clients (``draws``): m draws by lambda with replacement, weighted by their
        counts; or every federation client once, weighted by lambda. With ``embedding:
        current`` every federation client also trains in a topology round, weight 0 unless
        drawn, so that each node of the graph is a model of this round."""
        self._start(clients)
        self._steps = {}
        self._extra = set()
        if self.draws == "without_replacement":
            self._counts = dict.fromkeys(self.federation, 1)
            self._mix = {c: float(w) for c, w in zip(self.federation, self.weights, strict=True)}
        else:
            m = self.clients_per_round or len(self.federation)
            counts = draw_counts(self.weights, m, rng)
            self._counts = {self.federation[i]: int(c) for i, c in enumerate(counts) if c > 0}
            self._mix = {}
        for c in self._counts:
            self.last_drawn[self.federation.index(c)] = round
        if self.embedding_age == "current" and self._topology_round(round):
            self._extra = set(self.federation) - set(self._counts)
        return sorted(set(self._counts) | self._extra)

    def _topology_round(self, round_index: int) -> bool:
        return (round_index + 1) % self.update_every == 0

    def train_client(self, context: TrainingContext, client: int, round: int) -> None:
        self._context = context  # the server evaluates the new global model through it
        if self._columns is None:
            mask = parameter_mask(context, client)
            self._columns = embedding_columns(mask, context.layout.numels, self.embedding_last)
        counter = StepCounter()
        self._steps[client] = counter
        context.train(client, loss_hook=counter)

    def embedding(self, vectors: torch.Tensor) -> torch.Tensor:
        """The part of each model vector used as its node embedding: the parameter entries
        (all entries before any client trained)."""
        if self._columns is None:
            return vectors
        return vectors[:, self._columns.to(vectors.device)]

    def aggregate(
        self, global_vector: torch.Tensor, received: torch.Tensor, info: StarRound
    ) -> torch.Tensor:
        mix = torch.tensor([self._weight(c) for c in info.participants], dtype=torch.float64)
        if float(mix.sum()) <= 0:  # no drawn client among those that trained
            mix = torch.ones(len(info.participants), dtype=torch.float64)
        weights = (mix / mix.sum()).to(received.dtype).to(received.device)
        new_global = weights @ received
        self._remember(received, info.participants)
        if self._topology_round(info.round) and self.seen.sum() >= 2:
            self._update_topology(info.round)
        drawn = [c for c in info.participants if c not in self._extra] or list(info.participants)
        self._update_weights(new_global, info.round, self._local_steps(drawn))
        return new_global

    def _weight(self, client: int) -> float:
        """A trained client's weight in the new global model: its draw count, lambda_k when
        every client is drawn once, 0 when it trained only for the graph (``current``)."""
        if client in self._extra:
            return 0.0
        if self._mix:
            return self._mix.get(client, 0.0)
        return float(self._counts.get(client, 1))

    def _local_steps(self, participants: list[int]) -> float:
        """tau of the dual step: the drawn participants' mean local steps (1 without
        ``local_step_scale``; a participant that did not train counts 1, as in DRFA)."""
        if not self.local_step_scale:
            return 1.0
        counters = [self._steps.get(c) for c in participants]
        return float(np.mean([1 if k is None else k.calls for k in counters]))

    # ------------------------------------------------------------------ topology + lambda
    def _remember(self, received: torch.Tensor, participants: list[int]) -> None:
        emb = self.embedding(received).detach().float().cpu()
        if self.memory is None:
            self.memory = torch.zeros(len(self.federation), emb.shape[1])
        for row, client in enumerate(participants):
            i = self.federation.index(client)
            self.memory[i] = emb[row]
            self.seen[i] = True

    def _update_topology(self, round_index: int) -> None:
        assert self.memory is not None
        nodes = self.seen.copy()
        if self.embedding_age == "recent":  # drawn in the last f rounds (this one included)
            nodes &= self.last_drawn > round_index - self.update_every
            if nodes.sum() < 2:
                return
        idx = np.nonzero(nodes)[0]
        embeddings = self.memory[torch.from_numpy(idx)]
        finite = torch.isfinite(embeddings).all(dim=1).tolist()
        bad = [self.federation[i] for i, ok in zip(idx, finite, strict=True) if not ok]
        require(
            not bad,
            f"tfl: round {round_index}: the models of clients {bad} hold non-finite (NaN or "
            "inf) parameters, so no similarity graph exists: they diverged; lower the "
            "learning rate",
        )
        top = learn_topology(
            embeddings,
            self.similarity,
            self.epsilon,
            self.centrality,
            self.clusters,
            seed=self.seed,
            normalized_betweenness=self.normalized_betweenness,
            scaling=self.scaling,
            ordered_pairs=self.ordered_pairs,
        )
        prior = np.zeros(len(self.federation))
        prior[idx] = top.prior * len(idx) / len(self.federation)
        if len(idx) < len(self.federation):  # clients not in the graph: the smallest node mass
            prior[~nodes] = prior[idx].min()
        self.prior = prior / prior.sum()
        record = top.record(round_index, [self.federation[i] for i in idx])
        record["prior_all"] = [round(float(x), 6) for x in self.prior]
        self.topology_history.append(record)

    def _update_weights(self, new_global: torch.Tensor, round_index: int, tau: float) -> None:
        require(self._context is not None, "tfl: no client trained before aggregation")
        assert self._context is not None
        losses = np.array(
            [self._context.evaluate_loss(c, new_global, self.loss_subset) for c in self.federation]
        )
        losses, bad = finite_losses(losses, self.federation, round_index, "tfl")
        if bad:
            self.nonfinite_losses.append({"round": round_index, "clients": bad})
        step = dual_step_size(self.lr_lambda, self.lr_decay, round_index, tau)
        self.weights = dual_step(self.weights, losses, step, self.prior, self.q, self.floor)
        self.lambda_history.append([round(float(x), 6) for x in self.weights])

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            "federation": list(self.federation),
            "weights": torch.from_numpy(self.weights.copy()),
            "prior": torch.from_numpy(self.prior.copy()),
            "seen": [bool(s) for s in self.seen],
            "last_drawn": [int(r) for r in self.last_drawn],
            "memory": self.memory if self.memory is not None else torch.zeros(0),
            "lambda_history": self.lambda_history,
            "topology_history": self.topology_history,
            "nonfinite_losses": self.nonfinite_losses,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.federation = list(state["federation"])
        self.weights = state["weights"].numpy().copy()
        self.prior = state["prior"].numpy().copy()
        self.seen = np.array(state["seen"], dtype=bool)
        self.last_drawn = np.array(state.get("last_drawn", [-1] * len(self.seen)), dtype=int)
        self.memory = state["memory"] if state["memory"].numel() else None
        self.lambda_history = list(state["lambda_history"])
        self.topology_history = list(state["topology_history"])
        self.nonfinite_losses = list(state.get("nonfinite_losses", []))

    def final_similarities(self) -> dict[str, Any]:
        """Raw pairwise similarity of the clients' latest transmitted models (their node
        embeddings) under every similarity measure (l1, l2 negated distances), for TFL Figure 4."""
        if self.memory is None or self.seen.sum() < 2:
            return {}
        idx = np.nonzero(self.seen)[0]
        vectors = self.memory[torch.from_numpy(idx)]
        out: dict[str, Any] = {"clients": [self.federation[i] for i in idx]}
        for metric in SIMILARITIES:
            matrix = similarity_matrix(vectors, metric)
            out[metric] = [[float(f"{x:.8g}") for x in row] for row in matrix]
        return out

    def summary(self) -> dict[str, Any]:
        out = {
            "federation": list(self.federation),
            "lambda": self.lambda_history,
            "topology": self.topology_history,
            "similarities": self.final_similarities(),
        }
        if self.nonfinite_losses:  # rounds whose dual step met a diverged client
            out["nonfinite_losses"] = self.nonfinite_losses
        return out
