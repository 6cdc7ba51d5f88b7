"""Bench cells from the partial specs the benchmarks write: every key a benchmark leaves out is
filled by the same declarations a config fills it with, so a bench cell runs from a complete,
versioned cell spec like every other cell."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch

from benchlib.declarations.malfunctions import MalfunctionSettings
from benchlib.declarations.settings import TrainingSettings, TransformSettings
from benchlib.fl.engine import CellRun
from benchlib.grid.spec import SPEC_VERSION, CellSpec
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import ModelSettings
from benchlib.tasks.catalog import loss_settings


def filled_spec(raw: dict[str, Any]) -> dict[str, Any]:
    """The JSON form of a cell spec from a partial one, every default filled."""
    task = raw.get("task", "classification")
    training = TrainingSettings.from_config("training", raw["training"])
    loss, loss_params = loss_settings("", task, training.loss, training.loss_params)
    malfunctions = dict(raw.get("malfunction_params") or {})
    spec = CellSpec(
        experiment=raw["experiment"],
        dataset=raw["dataset"],
        method_id=raw["method_id"],
        method=raw["method"],
        malfunction=raw["malfunction"],
        k=raw["k"],
        seed=raw["seed"],
        clients=raw["clients"],
        model=ModelSettings.from_config("", raw["model"]),
        training=dataclasses.replace(training, loss=loss, loss_params=loss_params),
        method_params=METHODS.get(raw["method"]).params.resolve(
            "method params", raw.get("method_params")
        ),
        malfunction_params=MalfunctionSettings.from_config("malfunction", malfunctions).for_cell(
            raw["malfunction"]
        ),
        task=task,
        transforms=TransformSettings.from_config("transforms", raw.get("transforms")),
        held_out=tuple(raw.get("held_out", ())),
        axes=raw.get("axes", {}),
        plugins=raw.get("plugins", {}),
        version=SPEC_VERSION,
    )
    return spec.to_dict()


def bench_cell(spec: dict[str, Any], store: Path, split: Path, device: torch.device) -> CellRun:
    """A cell of a benchmark's partial ``spec`` (filled by :func:`filled_spec`)."""
    return CellRun(filled_spec(spec), Path(store), Path(split), device=device)
