"""Per-round test metrics (``training.round_metrics``): after every round, the named test
metrics of every scored client, for curves such as TFL Figure 7 (ROC-AUC per round).

Each round appends ``{"clients": [{metric: value}, ...], "held_out_clients": [...]}`` to the
history (``round_metrics`` in metrics.json): federation clients in federation order, scored with
the model they are scored with at the end (:meth:`Cell._evaluation_vector`), held-out clients
with the method's held-out model. Undefined values (e.g. ROC-AUC of a one-class test set) are
``None``. The evaluation runs inside the round, so it counts in the round's wall-clock time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchlib.errors import require

if TYPE_CHECKING:
    from benchlib.fl.engine import Cell


def check_round_metrics(names: list[str], available: tuple[str, ...] | list[str]) -> list[str]:
    """The requested metric names, or a clear error naming the task's metrics."""
    unknown = [n for n in names if n not in available]
    require(
        not unknown,
        f"training.round_metrics names {unknown}, which the task does not compute; choose from "
        f"{', '.join(available)}",
    )
    return list(names)


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def round_test_metrics(cell: Cell, names: list[str]) -> dict[str, Any]:
    """The test metrics ``names`` of every federation and held-out client after this round."""

    def pick(client: int, vector: Any) -> dict[str, float | None]:
        found = cell._test_metrics(client, vector)
        return {name: _finite(float(found[name])) for name in names}

    entry: dict[str, Any] = {
        "clients": [pick(c, cell._evaluation_vector(c)) for c in cell.federation]
    }
    if cell.held_out:
        vector = cell._held_out_vector()
        entry["held_out_clients"] = [pick(c, vector) for c in cell.held_out]
    return entry
