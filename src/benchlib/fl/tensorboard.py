"""Optional TensorBoard event files of a cell (``training.tensorboard: true``; the ``tracking``
extra): ``tensorboard/`` beside the cell's metrics.json, so ``tensorboard --logdir results/runs``
shows every cell as a run.

One step per round, written from the round's progress line (:mod:`benchlib.fl.progress`), so the
events hold exactly the values of progress.jsonl:

- ``val_<metric>/client_<c>`` (each client's primary validation metric; a non-finite one is not
  written) and ``val_<metric>/mean``;
- ``val_loss/client_<c>`` and ``val_loss/mean``: each client's mean task loss on its validation
  data with the model it is scored with (one more forward pass per client and round, made only
  when TensorBoard is on; the progress line then carries ``val_loss`` too);
- ``round/seconds``;
- the method's per-round summary: ``selections/client_<c>`` (how many peers client c kept),
  ``scores/client_<c>`` (the mean of c's finite scores of its peers), ``malfunctions/count``
  (malfunctioning clients this round) and every numeric ``round_metrics`` value
  (``round_metrics/<name>[/client_<c>]``).

A resumed cell purges the events of the rounds it trains again (``purge_step``), as it drops
their progress lines. Nothing here touches metrics.json.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TENSORBOARD_DIR = "tensorboard"


def tensorboard_dir(metrics_path: str | Path) -> Path:
    """The event folder of the cell whose metrics are written to ``metrics_path``."""
    return Path(metrics_path).parent / TENSORBOARD_DIR


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def round_scalars(line: dict[str, Any]) -> Iterator[tuple[str, float]]:
    """(tag, value) of every scalar of one progress line."""
    clients = line.get("clients", [])
    for key, values in line.items():
        if key.startswith("val_") and isinstance(values, list):
            finite = [n for n in map(_number, values) if n is not None]
            for client, value in zip(clients, values, strict=False):
                if (number := _number(value)) is not None:
                    yield f"{key}/client_{client}", number
            mean = _number(line.get("mean_val")) if key != "val_loss" else None
            if key == "val_loss" and finite:
                mean = sum(finite) / len(finite)
            if mean is not None:
                yield f"{key}/mean", mean
    if (seconds := _number(line.get("seconds"))) is not None:
        yield "round/seconds", seconds
    for client, chosen in enumerate(line.get("selections") or []):
        if isinstance(chosen, list):
            yield f"selections/client_{client}", float(len(chosen))
    for client, row in enumerate(line.get("scores") or []):
        finite = [n for n in map(_number, row or []) if n is not None]
        if finite:
            yield f"scores/client_{client}", sum(finite) / len(finite)
    if "schedule" in line:
        yield "malfunctions/count", float(len(line["schedule"] or {}))
    for name, value in (line.get("round_metrics") or {}).items():
        if isinstance(value, list):
            for client, item in enumerate(value):
                if (number := _number(item)) is not None:
                    yield f"round_metrics/{name}/client_{client}", number
        elif (number := _number(value)) is not None:
            yield f"round_metrics/{name}", number


class RoundWriter:
    """Writes one step of scalars per finished round into a cell's event folder."""

    def __init__(self, folder: str | Path, first_round: int) -> None:
        import tensorboard  # noqa: F401  (a clear "tracking extra" error when it is missing)
        from torch.utils.tensorboard import SummaryWriter

        Path(folder).mkdir(parents=True, exist_ok=True)
        self.writer = SummaryWriter(str(folder), purge_step=first_round or None)

    def add_round(self, line: dict[str, Any]) -> None:
        for tag, value in round_scalars(line):
            self.writer.add_scalar(tag, value, global_step=int(line["round"]))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
