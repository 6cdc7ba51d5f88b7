"""Classification and regression metrics on a cell's outputs, and the calibration error.

Macro precision/recall/F1, ROC-AUC, MSE and MAE follow torchmetrics' definitions and float
operations exactly (tests/primitives/test_metrics.py compares the bytes), so a cell scores as it did
with torchmetrics without importing it: torchmetrics loads torchvision, matplotlib and scipy, over a
second of CPU at every cell's start.
"""

from __future__ import annotations

from typing import Literal

import torch


def finite_rows(values: torch.Tensor) -> torch.Tensor:
    """Mask of rows with only finite entries (a corrupted model yields NaN/Inf rows)."""
    return torch.isfinite(values).all(dim=1)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Top-1 accuracy; a row with a non-finite logit counts as wrong."""
    if len(labels) == 0:
        return float("nan")
    correct = (logits.argmax(dim=1) == labels) & finite_rows(logits)
    return correct.double().mean().item()


def expected_calibration_error(
    confidence: torch.Tensor,
    correct: torch.Tensor,
    num_bins: int = 15,
    lowest_bin_closed: bool = True,
) -> float:
    """ECE with ``num_bins`` equal-width bins on [0, 1].

    Bins are (lower, upper]; with ``lowest_bin_closed`` the first bin also takes confidence 0.
    Samples whose confidence lies outside [0, 1] (or is NaN) fall in no bin but still count in
    the total N, as in the LIGHTYEAR authors' code. ECE = sum_b (n_b / N) |acc_b - conf_b|.
    """
    total = len(confidence)
    if total == 0:
        return float("nan")
    confidence = confidence.double()
    correct = correct.double().to(confidence.device)
    device = confidence.device  # a GPU cell scores peers on the GPU
    edges = torch.linspace(0.0, 1.0, num_bins + 1, dtype=torch.float64, device=device)
    bin_index = torch.bucketize(confidence, edges, right=False) - 1
    if lowest_bin_closed:
        bin_index = torch.where(confidence == 0.0, torch.zeros_like(bin_index), bin_index)
    valid = (bin_index >= 0) & (bin_index < num_bins) & torch.isfinite(confidence)
    bin_index = torch.where(valid, bin_index, torch.zeros_like(bin_index))
    weights = valid.double()
    counts = torch.zeros(num_bins, dtype=torch.float64, device=device).index_add_(
        0, bin_index, weights
    )
    conf_sum = torch.zeros(num_bins, dtype=torch.float64, device=device).index_add_(
        0, bin_index, torch.where(valid, confidence, torch.zeros_like(confidence))
    )
    acc_sum = torch.zeros(num_bins, dtype=torch.float64, device=device).index_add_(
        0, bin_index, correct * weights
    )
    occupied = counts > 0
    gaps = (acc_sum[occupied] - conf_sum[occupied]).abs()
    return (gaps.sum() / total).item()


def _class_counts(
    predicted: torch.Tensor, labels: torch.Tensor, num_classes: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """True positives, false positives and false negatives per class, from the confusion matrix."""
    pairs = labels.reshape(-1).long() * num_classes + predicted.reshape(-1).long()
    confusion = torch.bincount(pairs, minlength=num_classes**2).reshape(num_classes, num_classes)
    tp = confusion.diag()
    return tp, confusion.sum(0) - tp, confusion.sum(1) - tp


def _divide(num: torch.Tensor, den: torch.Tensor) -> torch.Tensor:
    """num / den in float, 0 where den is 0."""
    num, den = num.float(), den.float()
    return torch.where(den != 0, num / den, torch.zeros((), dtype=num.dtype, device=num.device))


def macro_score(
    kind: Literal["precision", "recall", "f1"],
    predicted: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
) -> float:
    """Macro average over the classes that occur in ``labels`` or ``predicted`` (0 where a
    class's denominator is 0); recall's macro average is the balanced accuracy."""
    tp, fp, fn = _class_counts(predicted, labels, num_classes)
    if kind == "precision":
        score = _divide(tp, tp + fp)
    elif kind == "recall":
        score = _divide(tp, tp + fn)
    else:
        score = _divide(2.0 * tp, 2.0 * tp + 1.0 * fn + fp)
    weights = torch.ones_like(score)
    weights[tp + fp + fn == 0] = 0.0
    return float(_divide(weights * score, weights.sum(-1, keepdim=True)).sum(-1))


def _roc_area(scores: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Area under the ROC curve of one score column (trapezoids over its distinct thresholds);
    a curve with no positives (negatives) has a true (false) positive rate of 0 throughout."""
    order = torch.argsort(scores, descending=True)
    scores, positive = scores[order], positive[order].long()
    last_of_each = torch.where(scores[1:] - scores[:-1])[0]
    ends = torch.nn.functional.pad(last_of_each, [0, 1], value=positive.size(0) - 1)
    tps = torch.cumsum(positive * 1.0, dim=0)[ends]
    fps = 1 + ends - tps
    tps = torch.cat([torch.zeros(1, dtype=tps.dtype, device=tps.device), tps])
    fps = torch.cat([torch.zeros(1, dtype=fps.dtype, device=fps.device), fps])
    fpr = fps / fps[-1] if fps[-1] > 0 else torch.zeros_like(fps)
    tpr = tps / tps[-1] if tps[-1] > 0 else torch.zeros_like(tps)
    return torch.trapz(tpr, fpr, dim=-1) * 1.0


def roc_auc(probabilities: torch.Tensor, labels: torch.Tensor) -> float:
    """ROC-AUC of class probabilities ``[N, C]``: of column 1 for two classes, else the macro
    one-vs-rest average over the classes whose area is defined."""
    labels = labels.reshape(-1)
    if probabilities.shape[1] == 2:
        return float(_roc_area(probabilities[:, 1].reshape(-1), labels == 1))
    areas = torch.stack(
        [_roc_area(probabilities[:, c], labels == c) for c in range(probabilities.shape[1])]
    )
    return float(areas[~torch.isnan(areas)].mean())


def mean_squared_error(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean of the squared errors over every output element."""
    diff = outputs.reshape(-1) - targets.reshape(-1)
    return float(torch.sum(diff * diff, dim=0) / targets.numel())


def mean_absolute_error(outputs: torch.Tensor, targets: torch.Tensor) -> float:
    """Mean of the absolute errors over every output element."""
    return float(
        torch.sum(torch.abs(outputs.reshape(-1) - targets.reshape(-1)), dim=0) / targets.numel()
    )
