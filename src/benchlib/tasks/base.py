"""The task interface: what a target is, the losses, the metrics, and what a peer scores.

A task is registered under a name of :data:`benchlib.tasks.catalog.TASKS` (which lists its losses,
metrics and primary metric for the torch-free config check). The engine asks the task for:

- ``target_array(arrays, labels)`` / ``to_target(batch)``: where a store keeps the targets
  (class ids, masks, float targets) and their tensor form;
- ``build_loss(name, params)``: a loss module ``loss(outputs, targets)``;
- ``primary(outputs, targets)``: the metric logged per round (validation);
- ``metrics(outputs, targets)``: every metric of the task (final test), name -> float;
- ``peer_view(outputs, targets)``: how a method that scores peers (LIGHTYEAR) sees a model's
  outputs: per-sample (or per-pixel) class scores ``[M, C]``, the matching labels ``[M]``, and a
  quality term replacing accuracy where the task has its own (segmentation: Dice).

Metrics come from benchlib.primitives.metrics (torchmetrics' definitions) or MONAI; a non-finite
output (a broken model) counts as a wrong prediction, never as an error.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from benchlib.declarations.registry import Registry, import_submodules
from benchlib.primitives.errors import BenchlibError
from benchlib.tasks.catalog import TASKS, TaskEntry


@dataclass(frozen=True)
class PeerScoring:
    """A model's outputs as a peer-scoring method sees them."""

    logits: torch.Tensor  # [M, C]
    labels: torch.Tensor  # [M]
    quality: float | None = None  # None: accuracy of logits vs labels


class Task:
    """Base class; subclasses set ``name`` and implement the hooks."""

    name: ClassVar[str]
    losses: ClassVar[dict[str, Callable[..., nn.Module]]] = {}
    target_kind: ClassVar[str] = "labels"  # "labels" (index.csv) or a store array name
    target_dtype: ClassVar[type] = np.int64

    @property
    def entry(self) -> TaskEntry:
        return TASKS.get(self.name)

    @property
    def primary_metric(self) -> str:
        return self.entry.primary_metric

    def target_array(self, arrays: dict[str, np.ndarray], labels: np.ndarray) -> np.ndarray:
        """All targets of a store, row i = store row i (may be memory-mapped)."""
        if self.target_kind == "labels":
            return labels.astype(self.target_dtype)
        return arrays[self.target_kind]

    def num_outputs(self, arrays: dict[str, np.ndarray], num_classes: int) -> int:
        """How many outputs a model of this task needs (default: one score per class)."""
        return num_classes

    def to_target(self, batch: np.ndarray) -> torch.Tensor:
        """Targets of some rows (numpy) as the tensor the loss and metrics take."""
        return torch.from_numpy(np.asarray(batch, dtype=self.target_dtype))

    def build_loss(
        self,
        name: str,
        params: Mapping[str, Any],
        train_labels: np.ndarray | None = None,
        num_classes: int = 0,
    ) -> nn.Module:
        """The loss ``name`` with its filled parameters (a resolved spec's
        ``training.loss`` and ``loss_params``; nothing is checked again).

        ``train_labels`` (the pooled training labels of the cell) and ``num_classes`` let a task
        derive parameters from the data (classification: ``alpha: inverse_train_frequency``).
        """
        return self.losses[name](**self.data_loss_params(dict(params), train_labels, num_classes))

    def data_loss_params(
        self, params: dict[str, Any], train_labels: np.ndarray | None, num_classes: int
    ) -> dict[str, Any]:
        """Loss parameters with data-derived values filled in (default: unchanged)."""
        return params

    def primary(self, outputs: torch.Tensor, targets: torch.Tensor) -> float:
        return self.metrics(outputs, targets, only=self.primary_metric)[self.primary_metric]

    def metrics(
        self, outputs: torch.Tensor, targets: torch.Tensor, only: str | None = None
    ) -> dict[str, float]:
        """Every metric of the task (or just ``only``); NaN for an empty set."""
        names = self.entry.metrics if only is None else (only,)
        if len(targets) == 0:
            return {name: float("nan") for name in names}
        scorers = self.scorers(outputs.detach().cpu(), targets.detach().cpu())
        with warnings.catch_warnings():  # e.g. classes absent from a client's test set
            warnings.simplefilter("ignore", UserWarning)
            return {name: float(scorers[name]()) for name in names}

    def scorers(
        self, outputs: torch.Tensor, targets: torch.Tensor
    ) -> dict[str, Callable[[], float]]:
        """Metric name -> a function computing it on these (CPU) outputs and targets."""
        raise NotImplementedError

    def class_counts(
        self, outputs: torch.Tensor, targets: torch.Tensor
    ) -> dict[str, list[int]] | None:
        """Per class: how many samples are of it (``true``), predicted as it (``predicted``) and
        both (``correct``). Summed over clients they give the macro scores of the pooled test
        predictions (``report/kinds/fedagain/fedagain_fig13.py``). None (default) for tasks
        without one class per sample."""
        return None

    def peer_view(self, outputs: torch.Tensor, targets: torch.Tensor) -> PeerScoring:
        raise BenchlibError(
            f"task {self.name} has no class predictions for peer scoring; use a method that "
            "does not score peers on validation data"
        )


_TASKS: Registry[type[Task]] = Registry(
    "task implementation", loader=import_submodules("benchlib.tasks", skip=("base",))
)


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator adding a task implementation under ``cls.name``."""
    return _TASKS.add(cls.name, cls)


def get_task(name: str) -> Task:
    """An instance of task ``name`` (a catalog task)."""
    TASKS.get(name)
    return _TASKS.get(name)()


def task_implementations() -> list[str]:
    return _TASKS.names()
