"""The engine side of saved predictions (:mod:`benchlib.facts.saved_predictions`): after the last
round, each scored client's chosen test samples are predicted with the model the client is
scored with (held-out clients: the method's held-out model) and encoded into metrics.json."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from benchlib.facts.saved_predictions import chosen_positions, encode_array
from benchlib.primitives.errors import require
from benchlib.tasks.segmentation import pixel_predictions

if TYPE_CHECKING:
    from benchlib.fl.scoring import Scorer


def saved_predictions(scorer: Scorer, n: int) -> dict[str, Any]:
    """``{"samples_per_client": n, "clients": {client: {"rows", "masks"}}}`` of a finished cell."""
    cell = scorer.cell
    require(
        cell.task.name == "segmentation",
        f"training.save_predictions saves class maps of segmentation cells; this cell's task is "
        f"{cell.task.name}: remove save_predictions",
    )
    clients = {}
    for client, vector in sorted(scorer.scored(), key=lambda item: item[0]):
        test_rows = cell.clients[client].rows["test"]
        rows = np.asarray(test_rows[chosen_positions(len(test_rows), n)], dtype=np.int64)
        if len(rows) == 0:
            continue
        outputs = scorer.outputs(vector, rows, client)
        classes = pixel_predictions(outputs.float()).cpu().numpy().astype(np.uint8)
        clients[str(client)] = {"rows": rows.tolist(), "masks": encode_array(classes)}
    return {"samples_per_client": int(n), "clients": clients}
