"""Upper bounds on the config's counts, checked with the schema before anything runs.

An absurd value (a typo such as ``rounds: 1000000000000``) would otherwise pass the checks and
fail hours later, or never finish. Each bound lies far above every paper setting (the paper
configs use at most 100 rounds, 5 local epochs, batch size 64, 72 clients and seeds 0..2), so
no real run meets it.
"""

from __future__ import annotations

MAX_ROUNDS = 100_000  # communication rounds of a cell
MAX_LOCAL_EPOCHS = 1_000  # local epochs per round
MAX_BATCH_SIZE = 1_000_000  # local batch size (a whole client's data in one batch fits)
MAX_CLIENTS = 1_000  # clients of a dataset (also the ``clients`` axis)
MAX_SEED = 2**31 - 1  # an experiment's seeds (they also name the cells' folders)
MAX_PREFETCH = 1_000  # streamed batches read ahead
MAX_SAVED_PREDICTIONS = 1_000  # segmentation maps kept per client in metrics.json
