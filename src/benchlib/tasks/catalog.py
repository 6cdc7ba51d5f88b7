"""The tasks a config may name: their losses (with parameters) and metrics (torch-free).

The implementations live in :mod:`benchlib.tasks` (torch), one module per task.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchlib.declarations.params import NO_PARAMS, NON_NEGATIVE, Param, Params
from benchlib.declarations.registry import Registry
from benchlib.primitives.errors import BenchlibError


@dataclass(frozen=True)
class TaskEntry:
    """A task: its losses (name -> parameters), metrics, and the metric tables default to."""

    losses: dict[str, Params]
    metrics: tuple[str, ...]
    primary_metric: str
    default_loss: str


TASKS: Registry[TaskEntry] = Registry("task")
TASKS.add(
    "classification",
    TaskEntry(
        losses={
            "cross_entropy": NO_PARAMS,
            "focal": Params(
                {
                    "gamma": Param(NON_NEGATIVE, 2.0, "focusing parameter gamma"),
                    "alpha": Param(
                        {
                            "oneOf": [
                                {"type": "array", "items": NON_NEGATIVE, "minItems": 1},
                                {"const": "inverse_train_frequency"},
                                {"type": "null"},
                            ]
                        },
                        None,
                        "per-class weights, inverse_train_frequency (FLamby), or null (none)",
                    ),
                }
            ),
        },
        metrics=(
            "accuracy",
            "balanced_accuracy",
            "precision_macro",
            "recall_macro",
            "f1_macro",
            "roc_auc",
        ),
        primary_metric="accuracy",
        default_loss="cross_entropy",
    ),
)
TASKS.add(
    "segmentation",
    TaskEntry(
        losses={
            "dice_ce": Params(
                {
                    "lambda_dice": Param(NON_NEGATIVE, 1.0, "weight of the Dice term"),
                    "lambda_ce": Param(NON_NEGATIVE, 1.0, "weight of the cross-entropy term"),
                }
            ),
            "dice": NO_PARAMS,
            "cross_entropy": NO_PARAMS,
        },
        metrics=("dice", "pixel_accuracy"),
        primary_metric="dice",
        default_loss="dice_ce",
    ),
)
TASKS.add(
    "regression",
    TaskEntry(
        losses={"mse": NO_PARAMS, "l1": NO_PARAMS},
        metrics=("mse", "mae"),
        primary_metric="mse",
        default_loss="mse",
    ),
)


def loss_settings(
    what: str, task: str, loss: str | None, params: Mapping[str, Any] | None
) -> tuple[str, dict[str, Any]]:
    """The task's loss (``None``: its default) and that loss's parameters with defaults filled."""
    entry = TASKS.get(task)
    name = loss or entry.default_loss
    if name not in entry.losses:
        raise BenchlibError(
            f"{what}task {task} has no loss {name!r}; choose one of: "
            f"{', '.join(sorted(entry.losses))}"
        )
    return name, entry.losses[name].resolve(f"{what}loss {name!r} params", params)
