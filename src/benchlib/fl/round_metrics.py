"""Per-round test metrics (``training.round_metrics``): after every round, the named test
metrics of every scored client, for curves such as TFL Figure 7 (ROC-AUC per round).

Each round appends ``{"clients": [{metric: value}, ...], "held_out_clients": [...]}`` to the
history (``round_metrics`` in metrics.json): federation clients in federation order, scored with
the model they are scored with at the end (:meth:`Scorer.evaluation_vector`), held-out clients
with the method's held-out model. Undefined values (e.g. ROC-AUC of a one-class test set) are
``None``. The evaluation runs inside the round, so it counts in the round's wall-clock time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchlib.primitives.errors import require

if TYPE_CHECKING:
    from benchlib.fl.scoring import Scorer


def check_round_metrics(names: list[str], available: tuple[str, ...] | list[str]) -> list[str]:
    """The requested metric names, or a clear error naming the task's metrics."""
    unknown = [n for n in names if n not in available]
    require(
        not unknown,
        f"training.round_metrics names {unknown}, which the task does not compute; choose from "
        f"{', '.join(available)}",
    )
    return list(names)


def round_test_metrics(scorer: Scorer, names: list[str]) -> dict[str, Any]:
    """The test metrics ``names`` of every federation and held-out client after this round."""
    from benchlib.fl.scoring import finite_or_none

    entry: dict[str, Any] = {"clients": []}
    for client, vector in scorer.scored():
        found, _ = scorer.test_scores(client, vector)
        key = "held_out_clients" if client in scorer.cell.held_out else "clients"
        entry.setdefault(key, []).append(
            {name: finite_or_none(float(found[name])) for name in names}
        )
    return entry
