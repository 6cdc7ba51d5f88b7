"""The task registry: metrics checked against hand-computed values, losses, catalog agreement."""

from __future__ import annotations

import math

import pytest
import torch

from benchlib.primitives.errors import BenchlibError
from benchlib.tasks import get_task
from benchlib.tasks.base import task_implementations
from benchlib.tasks.catalog import TASKS, loss_settings


def test_every_catalog_task_is_implemented_with_its_losses():
    assert task_implementations() == TASKS.names()
    for name in TASKS.names():
        task = get_task(name)
        assert sorted(task.losses) == sorted(TASKS.get(name).losses)
        assert task.primary_metric in TASKS.get(name).metrics


def test_classification_metrics_by_hand():
    logits = torch.tensor([[2.0, 1.0], [0.0, 1.0], [float("nan"), 0.0], [3.0, 0.0]])
    labels = torch.tensor([0, 1, 1, 1])
    metrics = get_task("classification").metrics(logits, labels)
    # predictions 0, 1, wrong (NaN row), 0 -> 2 of 4 right
    assert metrics["accuracy"] == 0.5
    # recall: class 0 1/1, class 1 1/3 -> balanced accuracy 2/3
    assert metrics["balanced_accuracy"] == pytest.approx(2 / 3)
    # precision: class 0 1/3 (rows 0, 2, 3 predicted 0), class 1 1/1
    assert metrics["precision_macro"] == pytest.approx((1 / 3 + 1) / 2)
    f1_0, f1_1 = 2 * (1 / 3) * 1 / (1 / 3 + 1), 2 * 1 * (1 / 3) / (1 + 1 / 3)
    assert metrics["f1_macro"] == pytest.approx((f1_0 + f1_1) / 2)
    # ROC-AUC on p(class 1): negative 0.269; positives 0.731, 0.5 (NaN row -> uniform), 0.047
    # -> 2 of the 3 positive/negative pairs ranked right
    assert metrics["roc_auc"] == pytest.approx(2 / 3)


def test_classification_metrics_of_an_empty_set_are_nan():
    metrics = get_task("classification").metrics(
        torch.zeros(0, 3), torch.zeros(0, dtype=torch.long)
    )
    assert all(math.isnan(v) for v in metrics.values())


def test_segmentation_dice_by_hand():
    masks = torch.tensor([[[1, 0], [0, 0]], [[0, 0], [0, 0]]])
    # image 0 predicts pixels (0,0) and (0,1): Dice = 2*1 / (1 + 2); image 1 predicts nothing
    # on an empty mask: Dice 1 (empty vs empty)
    scores = torch.zeros(2, 2, 2, 2)
    scores[0, 1, 0, :] = 5.0
    metrics = get_task("segmentation").metrics(scores, masks)
    assert metrics["dice"] == pytest.approx((2 / 3 + 1) / 2)
    assert metrics["pixel_accuracy"] == pytest.approx(7 / 8)
    view = get_task("segmentation").peer_view(scores, masks)
    assert view.logits.shape == (8, 2) and view.labels.tolist() == masks.reshape(-1).tolist()
    assert view.quality == pytest.approx(metrics["dice"])


def test_segmentation_nan_pixels_count_as_background():
    masks = torch.ones(1, 2, 2, dtype=torch.long)
    scores = torch.full((1, 2, 2, 2), float("nan"))
    assert get_task("segmentation").metrics(scores, masks)["dice"] == 0.0


def test_regression_metrics_by_hand_and_no_peer_view():
    task = get_task("regression")
    metrics = task.metrics(torch.tensor([[1.0], [3.0]]), torch.tensor([[0.0], [1.0]]))
    assert metrics == {"mse": pytest.approx((1 + 4) / 2), "mae": pytest.approx(1.5)}
    with pytest.raises(BenchlibError, match="no class predictions for peer scoring"):
        task.peer_view(torch.zeros(2, 1), torch.zeros(2, 1))


def test_losses_by_name_with_checked_parameters():
    task = get_task("classification")
    logits, labels = torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    assert loss_settings("", "classification", None, None) == ("cross_entropy", {})
    ce = task.build_loss("cross_entropy", {})(logits, labels)
    assert ce.item() == pytest.approx(torch.nn.functional.cross_entropy(logits, labels).item())
    focal = task.build_loss(*loss_settings("", "classification", "focal", {"alpha": [0.25, 0.75]}))
    assert 0 < focal(logits, labels).item() < ce.item()  # easy examples are down-weighted
    with pytest.raises(BenchlibError, match="task classification has no loss 'dice_ce'"):
        loss_settings("", "classification", "dice_ce", None)
    with pytest.raises(BenchlibError, match=r"loss 'focal' params: unknown parameter 'beta'"):
        loss_settings("", "classification", "focal", {"beta": 1})
    seg = get_task("segmentation").build_loss(*loss_settings("", "segmentation", None, None))
    perfect = torch.zeros(1, 2, 2, 2)
    perfect[0, 1] = 20.0
    perfect[0, 0] = -20.0
    assert seg(perfect, torch.ones(1, 2, 2, dtype=torch.long)).item() < 1e-3
