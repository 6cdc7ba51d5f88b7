"""Classification: one class id per sample; cross entropy or weighted focal loss."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

import numpy as np
import torch
from torch import nn

from benchlib.primitives.errors import require
from benchlib.primitives.metrics import accuracy, finite_rows, macro_score, roc_auc
from benchlib.tasks.base import PeerScoring, Task, register_task


class WeightedFocalLoss(nn.Module):
    """Softmax focal loss (Lin et al. 2017) with per-class ``alpha`` (MONAI's FocalLoss)."""

    def __init__(self, gamma: float = 2.0, alpha: Sequence[float] | None = None) -> None:
        super().__init__()
        from monai.losses import FocalLoss  # imported on use: MONAI is heavy to import

        self.loss = FocalLoss(
            to_onehot_y=True,
            use_softmax=True,
            gamma=float(gamma),
            alpha=None if alpha is None else [float(a) for a in alpha],
        )

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(logits, labels[:, None])


def inverse_train_frequency(labels: np.ndarray, num_classes: int) -> list[float]:
    """FLamby's Fed-ISIC2019 focal-loss weights: alpha_c = N / n_c over the pooled training
    labels; a class absent from them gets 0 (it never meets the loss, and N / 0 is undefined)."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes)
    return [len(labels) / n if n else 0.0 for n in counts.tolist()]


def safe_predictions(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """argmax per row; a row with a non-finite score becomes a wrong class."""
    num_classes = logits.shape[1]
    wrong = (labels + 1) % num_classes
    return torch.where(finite_rows(logits), logits.argmax(dim=1), wrong)


def safe_probabilities(logits: torch.Tensor) -> torch.Tensor:
    """Softmax per row; a row with a non-finite score becomes the uniform distribution."""
    probs = torch.softmax(logits.double(), dim=1)
    uniform = torch.full_like(probs, 1.0 / logits.shape[1])
    return torch.where(finite_rows(logits)[:, None], probs, uniform).float()


@register_task
class Classification(Task):
    name = "classification"
    losses: ClassVar[dict[str, Callable[..., nn.Module]]] = {
        "cross_entropy": nn.CrossEntropyLoss,
        "focal": WeightedFocalLoss,
    }

    def data_loss_params(
        self, params: dict[str, Any], train_labels: np.ndarray | None, num_classes: int
    ) -> dict[str, Any]:
        if params.get("alpha") != "inverse_train_frequency":
            return params
        require(
            train_labels is not None and len(train_labels) > 0 and num_classes > 0,
            "loss alpha inverse_train_frequency needs the cell's training labels (none given)",
        )
        assert train_labels is not None
        return {**params, "alpha": inverse_train_frequency(train_labels, num_classes)}

    def scorers(
        self, outputs: torch.Tensor, targets: torch.Tensor
    ) -> dict[str, Callable[[], float]]:
        num_classes = outputs.shape[1]

        def macro(kind: Literal["precision", "recall", "f1"]) -> Callable[[], float]:
            return lambda: macro_score(
                kind, safe_predictions(outputs, targets), targets, num_classes
            )

        return {
            "accuracy": lambda: accuracy(outputs, targets),  # exact count ratio in float64
            "balanced_accuracy": macro("recall"),
            "precision_macro": macro("precision"),
            "recall_macro": macro("recall"),
            "f1_macro": macro("f1"),
            "roc_auc": lambda: self._roc_auc(outputs, targets),
        }

    def class_counts(
        self, outputs: torch.Tensor, targets: torch.Tensor
    ) -> dict[str, list[int]] | None:
        num_classes = outputs.shape[1]
        labels = targets.detach().cpu().long()
        predicted = safe_predictions(outputs.detach().cpu(), labels)
        hits = labels[predicted == labels]
        return {
            "true": torch.bincount(labels, minlength=num_classes).tolist(),
            "predicted": torch.bincount(predicted, minlength=num_classes).tolist(),
            "correct": torch.bincount(hits, minlength=num_classes).tolist(),
        }

    @staticmethod
    def _roc_auc(logits: torch.Tensor, labels: torch.Tensor) -> float:
        """Macro one-vs-rest ROC-AUC; undefined (NaN) when the labels hold a single class."""
        if labels.unique().numel() < 2:
            return float("nan")
        return roc_auc(safe_probabilities(logits), labels)

    def peer_view(self, outputs: torch.Tensor, targets: torch.Tensor) -> PeerScoring:
        return PeerScoring(logits=outputs, labels=targets)
