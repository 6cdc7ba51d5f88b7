"""The training-details table (LIGHTYEAR appendix Table 1), rendered from the config itself.

One column per dataset the chosen experiments use (in first-use order), one row per setting:
loss, optimizer, learning rate, weight decay, momentum, batch size, rounds, local epochs. Config
entry (``experiments`` defaults to all of the config's experiments)::

    reports:
      training_details: {kind: training_details, experiments: [femnist, camelyon17]}
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchlib import __version__
from benchlib.declarations.params import Params
from benchlib.report.base import (
    ReportKind,
    check_experiments,
    check_outputs,
    derived_param,
    register_kind,
    spec_value,
)

if TYPE_CHECKING:
    from benchlib.report.base import ReportConfig

# optimizer name -> (table label, whether it has a momentum setting)
OPTIMIZERS: dict[str, tuple[str, bool]] = {"adam": ("Adam", False), "sgd": ("SGD", True)}
LOSSES: dict[str, str] = {"cross_entropy": "Cross Entropy", "focal": "Weighted Focal Loss"}


def format_number(value: float) -> str:
    """Numbers as the paper prints them: ``1e-3``, ``5e-4``, ``0``, ``0.9``, ``32``."""
    value = float(value)
    if value == 0:
        return "0"
    if abs(value) < 0.01:
        mantissa, exponent = f"{value:.6e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        return f"{mantissa}e{int(exponent)}"
    return f"{value:g}"


def _momentum(training: dict[str, Any]) -> str:
    _, has_momentum = OPTIMIZERS.get(training["optimizer"], (training["optimizer"], False))
    return format_number(training["momentum"]) if has_momentum else "-"


ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("Loss Function", lambda t: LOSSES.get(t["loss"], t["loss"])),
    ("Optimizer", lambda t: OPTIMIZERS.get(t["optimizer"], (t["optimizer"], False))[0]),
    ("Learning Rate", lambda t: format_number(t["lr"])),
    ("Weight Decay", lambda t: format_number(t["weight_decay"])),
    ("Momentum", _momentum),
    ("Batchsize", lambda t: str(t["batch_size"])),
    ("Rounds", lambda t: str(t["rounds"])),
    ("Local Epochs", lambda t: str(t["local_epochs"])),
]


def training_details_spec(
    config: ReportConfig, experiments: list[str] | None = None
) -> dict[str, Any]:
    """The table's input: each used dataset's label and training section, in first-use order."""
    chosen = list(config.experiments) if experiments is None else experiments
    datasets = list(dict.fromkeys(config.experiments[e]["dataset"] for e in chosen))
    return {
        "datasets": [
            {
                "label": config.dataset_label(name),
                "training": dict(config.datasets[name]["training"]),
            }
            for name in datasets
        ]
    }


def render_training_details(spec: dict[str, Any]) -> str:
    """The LaTeX source of the training-details table."""
    from benchlib.report.latex import render_template

    datasets = spec_value(spec, "datasets")
    columns = [entry["label"] for entry in datasets]
    rows = [
        {"label": label, "cells": [cell(entry["training"]) for entry in datasets]}
        for label, cell in ROWS
    ]
    return render_template(
        "training_details.tex.j2", version=__version__, columns=columns, rows=rows
    )


@register_kind
class TrainingDetails(ReportKind):
    name = "training_details"
    output = "table"
    params = Params(
        {
            "experiments": derived_param(
                {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string"}},
                "whose datasets become columns",
                "all experiments",
            )
        }
    )

    def spec(self, name: str, params: dict[str, Any], config: ReportConfig) -> dict[str, Any]:
        experiments = params["experiments"]
        if experiments is not None:
            check_experiments(config, experiments)
        return training_details_spec(config, experiments)

    def render(self, spec: dict[str, Any], inputs: list[Path], outputs: list[Path]) -> None:
        from benchlib.primitives.io import write_text_atomic

        check_outputs(self, outputs)
        write_text_atomic(outputs[0], render_training_details(spec))
