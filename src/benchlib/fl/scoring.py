"""Scoring a cell's models: which model each client is scored with, that model's outputs on store
rows, the task's primary metric, the test metrics and per-class counts of metrics.json, and the
evaluator through which P2P methods score their peers.

Which rows a client is scored on (:meth:`Scorer.scored_rows`): a federation client on its test
subset; a held-out client, which never trains, on all of its rows (train, validation and test:
every one is unseen; ``training.held_out_rows: test`` keeps the test subset only). Besides the
per-client metrics, metrics.json ``pooled`` holds the test metrics of the pooled predictions
per scope (``if``: the federation clients, ``oof``: the held-out ones) - e.g. the global
accuracy, one ROC-AUC over all the held-out hospitals' patients, the MSE over all windows -
for every task but segmentation (whose outputs are too large to pool).

The engine's :class:`~benchlib.fl.engine.CellRun` owns the models and the round loop; a
:class:`Scorer` reads the cell through :class:`ScoredCell` (what scoring needs of it) and never
changes a model the round loop uses (it loads vectors into the cell's scratch model).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from benchlib.declarations.settings import TrainingSettings
from benchlib.fl.batched import BatchedClients
from benchlib.fl.data import SUBSETS, BatchSource, ClientData
from benchlib.fl.loops import predict
from benchlib.methods.base import Method, PeerEvaluator, StarMethod
from benchlib.models.vectors import ParamLayout
from benchlib.tasks.base import Task


def finite_or_none(value: float) -> float | None:
    """``value``, or None when it is NaN or infinite (metrics.json holds no NaN)."""
    return value if value == value and abs(value) != float("inf") else None


class ScoredCell(Protocol):
    """The parts of a running cell that scoring reads."""

    method: Method
    layout: ParamLayout
    scratch: nn.Module
    models: list[nn.Module]
    source: BatchSource
    task: Task
    precision: str
    clients: list[ClientData]
    training: TrainingSettings
    global_vector: torch.Tensor
    federation: list[int]
    held_out: list[int]
    malicious: list[int]
    batched: BatchedClients | None


class Scorer:
    """Scores the models of ``cell`` (see the module docstring)."""

    def __init__(self, cell: ScoredCell) -> None:
        self.cell = cell

    def outputs(self, vector: torch.Tensor, rows: np.ndarray, client: int | None) -> torch.Tensor:
        """Outputs of the model ``vector`` on store ``rows`` (client's private parameters kept)."""
        cell = self.cell
        if cell.method.private_prefixes and client is not None:
            cell.scratch.load_state_dict(cell.models[client].state_dict())
        cell.layout.load(cell.scratch, vector)
        return predict(cell.scratch, cell.source, rows, precision=cell.precision)

    def evaluate(self, client: int, vector: torch.Tensor, subset: str) -> float:
        """The task's primary metric of ``vector`` on the client's ``subset``."""
        rows = self.cell.clients[client].rows[subset]
        outputs = self.outputs(vector, rows, client)
        return self.cell.task.primary(outputs, self.cell.source.targets_of(rows))

    def loss(self, client: int, subset: str) -> float | None:
        """The client's mean task loss on ``subset`` with the model it is scored with (None
        when the subset is empty or the loss not finite)."""
        rows = self.cell.clients[client].rows[subset]
        if not len(rows):
            return None
        outputs = self.outputs(self.evaluation_vector(client), rows, client)
        with torch.no_grad():
            return finite_or_none(
                float(self.cell.loss_fn(outputs, self.cell.source.targets_of(rows)))
            )

    def evaluation_vector(self, client: int) -> torch.Tensor:
        """The model a federation client is scored with: star - the method's view of the
        global model (e.g. Ditto's personal model); P2P - the client's own model."""
        cell = self.cell
        if isinstance(cell.method, StarMethod):
            return cell.method.evaluation_vector(client, cell.global_vector)
        return cell.layout.flatten(cell.models[client])

    def held_out_vector(self) -> torch.Tensor:
        """The model held-out clients are scored with (the method's choice)."""
        cell = self.cell
        own = [cell.layout.flatten(cell.models[c]) for c in cell.federation]
        return cell.method.held_out_vector(cell.global_vector, own)

    def scored(self) -> list[tuple[int, torch.Tensor]]:
        """Every scored client with its model: the federation, then the held-out clients."""
        pairs = [(c, self.evaluation_vector(c)) for c in self.cell.federation]
        if self.cell.held_out:
            vector = self.held_out_vector()
            pairs += [(c, vector) for c in self.cell.held_out]
        return pairs

    def primary(self, client: int, subset: str) -> float | None:
        """The client's primary metric on ``subset`` with the model it is scored with."""
        return finite_or_none(self.evaluate(client, self.evaluation_vector(client), subset))

    def scored_rows(self, client: int) -> np.ndarray:
        """The store rows ``client`` is scored on: its test subset, or for a held-out client
        all of its rows (``training.held_out_rows``: ``all``, the default, or ``test``)."""
        rows = self.cell.clients[client].rows
        if client in self.cell.held_out and self.cell.settings.held_out_rows == "all":
            return np.concatenate([rows[subset] for subset in SUBSETS])
        return rows["test"]

    def scored_outputs(
        self, client: int, vector: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(outputs of ``vector``, targets) on the client's :meth:`scored_rows`."""
        rows = self.scored_rows(client)
        return self.outputs(vector, rows, client), self.cell.source.targets_of(rows)

    def test_scores(
        self, client: int, vector: torch.Tensor
    ) -> tuple[dict[str, float], dict[str, list[int]] | None]:
        """The task's test metrics of ``vector`` on the client's scored rows and its per-class
        counts (None for tasks without classes or no rows), from one forward pass."""
        outputs, targets = self.scored_outputs(client, vector)
        return self._scores(outputs, targets)

    def _scores(
        self, outputs: torch.Tensor, targets: torch.Tensor
    ) -> tuple[dict[str, float], dict[str, list[int]] | None]:
        counts = self.cell.task.class_counts(outputs, targets) if len(targets) else None
        return self.cell.task.metrics(outputs, targets), counts

    def client_entry(self, client: int, metrics: dict[str, float]) -> dict[str, Any]:
        """One client's entry in metrics.json: test metrics and subset sizes (a held-out
        client also ``n_scored``, the rows it is scored on)."""
        entry = {
            "client": client,
            "malicious": client in self.cell.malicious,
            **{f"test_{name}": finite_or_none(value) for name, value in metrics.items()},
            **{f"n_{k}": v for k, v in self.cell.clients[client].sizes.items()},
        }
        if client in self.cell.held_out:
            entry["n_scored"] = len(self.scored_rows(client))
        return entry

    def results(self) -> dict[str, Any]:
        """``clients`` (and ``held_out_clients``) entries of metrics.json, ``class_counts`` per
        client id where the task counts classes (macro scores of pooled predictions), and
        ``pooled``: per scope, the test metrics of the scope's pooled predictions."""
        entries: dict[str, list[dict[str, Any]]] = {"clients": [], "held_out_clients": []}
        counts_by_client: dict[str, dict[str, list[int]]] = {}
        pool = self.cell.task.name != "segmentation"
        pooled: dict[str, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        for client, vector in self.scored():
            outputs, targets = self.scored_outputs(client, vector)
            metrics, counts = self._scores(outputs, targets)
            key = "held_out_clients" if client in self.cell.held_out else "clients"
            entries[key].append(self.client_entry(client, metrics))
            if counts is not None:
                counts_by_client[str(client)] = counts
            if pool and len(targets):
                scope = pooled.setdefault("oof" if key == "held_out_clients" else "if", ([], []))
                scope[0].append(outputs)
                scope[1].append(targets)
        result: dict[str, Any] = {"clients": entries["clients"]}
        if self.cell.held_out:
            result["held_out_clients"] = entries["held_out_clients"]
        if counts_by_client:
            result["class_counts"] = counts_by_client
        if pooled:
            result["pooled"] = {
                scope: {
                    name: finite_or_none(float(value))
                    for name, value in self.cell.task.metrics(
                        torch.cat(outs), torch.cat(targets)
                    ).items()
                }
                for scope, (outs, targets) in sorted(pooled.items())
            }
        return result

    def peer_evaluator(self, client: int) -> PeerEvaluator:
        """Scores peers' vectors on the client's validation rows (batched where the cell's
        clients train batched)."""
        cell = self.cell
        rows = cell.clients[client].rows["val"]
        targets = cell.source.targets_of(rows)
        batched = cell.batched
        return PeerEvaluator(
            predict=lambda vector: self.outputs(vector, rows, client),
            labels=targets,
            view=lambda vector: cell.task.peer_view(self.outputs(vector, rows, client), targets),
            predict_many=None
            if batched is None
            else lambda vectors: batched.predict_many(
                cell.layout.unflatten_many(vectors), cell.source, rows
            ),
            view_of_outputs=lambda outputs: cell.task.peer_view(outputs, targets),
        )
