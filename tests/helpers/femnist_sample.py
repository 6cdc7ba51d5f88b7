"""The real FEMNIST LEAF sample beside the project (../shared/data/femnist_leaf_sample) and the
counts read from it by hand: its eight shards and their train / test sizes."""

from __future__ import annotations

from helpers.paths import SHARED_DATA

LEAF_SAMPLE = SHARED_DATA / "femnist_leaf_sample"
SHARDS = [f"all_data_{i}_niid_05_keep_0" for i in range(8)]
TRAIN_PER_SHARD = [665, 664, 673, 686, 685, 659, 762, 746]
TEST_PER_SHARD = [76, 78, 79, 79, 79, 78, 88, 87]
