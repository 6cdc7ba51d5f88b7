"""Upper bounds on the config's counts, checked with the schema before anything runs.

An absurd value (a typo such as ``rounds: 1000000000000``) would otherwise pass the checks and
fail hours later, or never finish. Each bound lies far above every paper setting (the paper
configs use at most 100 rounds, 5 local epochs, batch size 64, 72 clients, seeds 0..2 and a
learning rate of at most 1), so no real run meets it.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_ROUNDS = 100_000  # communication rounds of a cell
MAX_LOCAL_EPOCHS = 1_000  # local epochs per round
MAX_LR = 1_000.0  # learning rate (1e308 overflows Adam's update to NaN in the first step)
MAX_BATCH_SIZE = 1_000_000  # local batch size (a whole client's data in one batch fits)
MAX_CLIENTS = 1_000  # clients of a dataset (also the ``clients`` axis)
MAX_SEED = 2**31 - 1  # an experiment's seeds (they also name the cells' folders)
MAX_PREFETCH = 1_000  # streamed batches read ahead
MAX_SAVED_PREDICTIONS = 1_000  # segmentation maps kept per client in metrics.json
MAX_THREADS = 1_024  # a process's compute threads (``--threads``; each takes a stack)
MAX_INPUT_SIZE = 4_096  # side of the model's square input (papers: at most 256)
MAX_RESAMPLES = 1_000_000  # bootstrap resamples of a report (the papers' reports use <= 9,999)


def byte_size(size: float) -> str:
    """``size`` bytes in words: ``43.7 TiB``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} PiB"


def _input_cost(side: int) -> str:
    size = byte_size(4.0 * side * side)
    return f"one float32 input of {side} x {side} pixels takes {size} a channel"


def _resample_cost(resamples: int) -> str:
    size = byte_size(8.0 * resamples)
    return f"{resamples:,} resamples take at least {size} (8 bytes each, per unit)"


# What a value over its bound would cost: said in the error of a value above the bound, so that
# the bound does not look arbitrary (keyed by the setting's name).
COSTS: dict[str, Callable[[int], str]] = {
    "input_size": _input_cost,
    "eval_crop": _input_cost,
    "resamples": _resample_cost,
}
