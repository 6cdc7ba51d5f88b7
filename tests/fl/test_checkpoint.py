"""A forged or damaged checkpoint round is never resumed: a round outside the cell's rounds, one
that disagrees with the checkpoint's file name or with the history it holds, starts the cell
afresh with one warning line, and the cell's metrics are those of an uninterrupted run."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from benchlib.fl.checkpoint import checkpoint_path
from benchlib.fl.engine import run_cell
from benchlib.grid.spec import CellSpec

ROUNDS = 3


@pytest.fixture(scope="module")
def cell(smoke_config, tmp_path_factory) -> tuple[CellSpec, Path]:
    """A 3-round FedAvg smoke cell's spec and its uninterrupted metrics.json."""
    from benchlib.configuration.config import Cell

    spec = smoke_config.cell_spec(Cell("smoke", "sfa", "fedavg", 1, 0))
    spec = dataclasses.replace(spec, training=dataclasses.replace(spec.training, rounds=ROUNDS))
    return spec, tmp_path_factory.mktemp("whole") / "metrics.json"


@pytest.fixture(scope="module")
def whole(cell, mnist_store, smoke_split) -> bytes:
    spec, out = cell
    run_cell(spec, mnist_store, smoke_split, out, out.parent / "ckpt")
    return out.read_bytes()


def _set(key: str, value: Any) -> Callable[[dict], None]:
    return lambda state: state.__setitem__(key, value)


FORGED: dict[str, tuple[int, Callable[[dict], None], str]] = {
    # name: (round index in the file name, edit of the saved state, the warning's words)
    "round_7_of_3": (7, _set("completed_round", 7), "claims the round index 7, outside 0..2"),
    "negative_round": (0, _set("completed_round", -5), "claims the round index -5, outside"),
    "round_not_an_integer": (0, _set("completed_round", True), "holds the round True, not an"),
    "name_disagrees": (2, lambda state: None, "is named for round index 2 but holds 0"),
    "history_disagrees": (1, _set("completed_round", 1), "holds 1 rounds of val_accuracy for"),
}


@pytest.mark.parametrize("case", sorted(FORGED))
def test_a_forged_checkpoint_round_starts_the_cell_fresh(
    case, cell, whole, mnist_store, smoke_split, tmp_path, caplog
):
    spec, _ = cell
    named, edit, words = FORGED[case]
    ckpt, out = tmp_path / "ckpt", tmp_path / "metrics.json"
    assert run_cell(spec, mnist_store, smoke_split, out, ckpt, stop_after=1) is None
    saved = checkpoint_path(ckpt, 0)
    state = torch.load(saved, weights_only=True)
    edit(state)
    saved.unlink()
    torch.save(state, checkpoint_path(ckpt, named))
    with caplog.at_level(logging.INFO, logger="benchlib"):
        run_cell(spec, mnist_store, smoke_split, out, ckpt, tmp_path / "timing.json")
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings
    assert words in warnings[0] and warnings[0].endswith("ignoring it and starting fresh")
    assert "resuming" not in caplog.text
    assert out.read_bytes() == whole  # all rounds trained, as if never interrupted
    assert json.loads((tmp_path / "timing.json").read_text())["resumed_from_round"] == 0
    assert not ckpt.exists()
