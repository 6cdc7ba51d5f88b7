"""FEMNIST clients and subsets: leaf-shards (one LEAF shard per client), writers (K seeded writers
per client), split modes random (pooled fractions) and source (LEAF/TFF train/test, a seeded
third of test moved to val)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from helpers.femnist_sample import LEAF_SAMPLE, SHARDS, TEST_PER_SHARD, TRAIN_PER_SHARD

from benchlib.data.partition import UNASSIGNED, check_partition_params, partition
from benchlib.data.registry import get_dataset
from benchlib.data.split import SplitSpec, make_split, read_split, write_split
from benchlib.data.store import PreparedData, load_store
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.seeding import numpy_rng


@pytest.fixture(scope="module")
def leaf_data(tmp_path_factory) -> PreparedData:
    out = tmp_path_factory.mktemp("leafsplit") / "store"
    get_dataset("femnist_leaf").prepare(out, {"path": str(LEAF_SAMPLE)})
    return load_store(out)


def spec(partition_cfg: dict, split_cfg: dict, clients: int = 8) -> SplitSpec:
    return SplitSpec.from_config(
        {"clients": clients, "partition": partition_cfg, "split": split_cfg}
    )


def shard_writers(shard: str) -> set[str]:
    return set(json.loads((LEAF_SAMPLE / "train" / f"{shard}_train_9.json").read_text())["users"])


def test_leaf_shards_one_shard_per_client_with_pooled_random_fractions(leaf_data, tmp_path):
    table = make_split(
        leaf_data, spec({"name": "leaf-shards"}, {"val": 0.1, "test": 0.2, "seed": 0})
    )
    assert len(table) == 6184
    for client, shard in enumerate(SHARDS):
        rows = table[table["client"] == client]
        assert set(rows["group"]) == shard_writers(shard)  # the split CSV records writer ids
        n = TRAIN_PER_SHARD[client] + TEST_PER_SHARD[client]
        counts = rows["subset"].value_counts()
        assert len(rows) == n
        assert counts["val"] == round(0.1 * n) and counts["test"] == round(0.2 * n)
        assert counts["train"] == n - round(0.1 * n) - round(0.2 * n)
    path = tmp_path / "split.csv"
    write_split(table, path)
    again = read_split(path, leaf_data, 8)
    assert list(again.columns) == ["sample_id", "client", "subset", "group", "partitioner"]
    assert again["group"].str.fullmatch(r"f\d{4}_\d{2}").all()


def test_leaf_shards_source_mode_moves_a_third_of_test_to_val(leaf_data):
    first = make_split(
        leaf_data, spec({"name": "leaf-shards"}, {"mode": "source", "val_from_test": "1/3"})
    )
    source = leaf_data.index.set_index("sample_id")["source_split"]
    for client in range(8):
        rows = first[first["client"] == client]
        subsets = rows["subset"].value_counts()
        assert subsets["train"] == TRAIN_PER_SHARD[client]
        assert subsets["val"] == TEST_PER_SHARD[client] // 3  # floor, like int(n/3)
        assert subsets["test"] == TEST_PER_SHARD[client] - TEST_PER_SHARD[client] // 3
        train_ids = rows.loc[rows["subset"] == "train", "sample_id"]
        assert (source[train_ids] == "train").all()
        held_out = rows.loc[rows["subset"] != "train", "sample_id"]
        assert (source[held_out] == "test").all()
    again = make_split(
        leaf_data, spec({"name": "leaf-shards"}, {"mode": "source", "val_from_test": "1/3"})
    )
    pd.testing.assert_frame_equal(first, again)
    other = make_split(
        leaf_data,
        spec({"name": "leaf-shards"}, {"mode": "source", "val_from_test": "1/3", "seed": 1}),
    )

    def ids(table: pd.DataFrame, subset: str) -> set[str]:
        return set(table.loc[table["subset"] == subset, "sample_id"])

    assert ids(first, "val") != ids(other, "val")  # the seed picks which test samples move
    assert ids(first, "train") == ids(other, "train")


def test_leaf_shards_fewer_clients_take_the_first_shards_in_sorted_order(leaf_data):
    table = make_split(
        leaf_data, spec({"name": "leaf-shards"}, {"val": 0.1, "test": 0.2}, clients=3)
    )
    assert len(table) == sum(TRAIN_PER_SHARD[:3]) + sum(TEST_PER_SHARD[:3])
    for client in range(3):
        assert set(table.loc[table["client"] == client, "group"]) == shard_writers(SHARDS[client])
    with pytest.raises(BenchlibError, match=r"8 LEAF shards cannot fill 9 clients"):
        make_split(leaf_data, spec({"name": "leaf-shards"}, {"val": 0.1, "test": 0.2}, clients=9))


def test_writers_partition_k_distinct_writers_per_client(leaf_data):
    cfg = {"name": "writers", "writers_per_client": 5}
    first = make_split(leaf_data, spec(cfg, {"mode": "source", "val_from_test": 0.5, "seed": 3}))
    per_client = first.groupby("client")["group"].agg(lambda g: frozenset(g))
    assert sorted(per_client.index) == list(range(8))
    assert all(len(w) == 5 for w in per_client)
    assert len(frozenset().union(*per_client)) == 40  # disjoint
    writer_sizes = leaf_data.index.groupby("group").size()
    assert len(first) == writer_sizes[sorted(frozenset().union(*per_client))].sum()
    again = make_split(leaf_data, spec(cfg, {"mode": "source", "val_from_test": 0.5, "seed": 3}))
    pd.testing.assert_frame_equal(first, again)
    other = make_split(leaf_data, spec(cfg, {"mode": "source", "val_from_test": 0.5, "seed": 4}))
    assert set(first["group"]) != set(other["group"]) or (first["client"] != other["client"]).any()
    with pytest.raises(
        BenchlibError, match=r"8 clients x 6 writers need 48 writers, the data has 47"
    ):
        make_split(
            leaf_data, spec({"name": "writers", "writers_per_client": 6}, {"val": 0.1, "test": 0.1})
        )


def test_writers_partition_unit():
    groups = np.array([f"w{i // 3:02d}" for i in range(30)])  # 10 writers x 3 samples
    labels = np.zeros(30, dtype=np.int64)
    clients = partition("writers", labels, groups, 4, numpy_rng(0, "p"), {"writers_per_client": 2})
    assert (clients == UNASSIGNED).sum() == 6  # two writers left over
    frame = pd.DataFrame({"g": groups, "c": clients})
    assert (frame.groupby("g")["c"].nunique() == 1).all()
    assert np.bincount(clients[clients >= 0]).tolist() == [6, 6, 6, 6]
    with pytest.raises(BenchlibError, match=r"needs writer ids in the store's group column"):
        partition(
            "writers", labels, np.array([""] * 30), 4, numpy_rng(0, "p"), {"writers_per_client": 1}
        )


def test_store_without_shards_or_source_split_gives_clear_errors():
    index = pd.DataFrame(
        {
            "sample_id": [f"s{i:03d}" for i in range(40)],
            "label": np.arange(40) % 4,
            "group": [f"w{i % 8}" for i in range(40)],
            "source_split": "",
        }
    )
    data = PreparedData(
        index=index, arrays={"pixels": np.zeros((40, 2, 2), np.uint8)}, manifest={"num_classes": 4}
    )
    with pytest.raises(
        BenchlibError, match=r"needs the store column 'shard'.*use partition writers"
    ):
        make_split(data, spec({"name": "leaf-shards"}, {"val": 0.2, "test": 0.2}, clients=2))
    with pytest.raises(BenchlibError, match=r"gives no train/test split: use split.mode random"):
        make_split(
            data,
            spec(
                {"name": "writers", "writers_per_client": 2},
                {"mode": "source", "val_from_test": "1/3"},
                2,
            ),
        )


def test_split_spec_modes_and_fraction_parsing():
    source = spec({"name": "leaf-shards"}, {"mode": "source", "val_from_test": "1/3"})
    assert source.mode == "source" and source.val_from_test == Fraction(1, 3)
    assert spec({"name": "iid"}, {"val": 0.1, "test": 0.2}).mode == "random"
    with pytest.raises(BenchlibError, match=r"takes split.val_from_test, not split.val"):
        spec({"name": "iid"}, {"mode": "source", "val": 0.1, "test": 0.1})
    with pytest.raises(BenchlibError, match=r"applies only to split.mode source"):
        spec({"name": "iid"}, {"val": 0.1, "test": 0.1, "val_from_test": 0.3})
    with pytest.raises(BenchlibError, match=r"split.val_from_test='3/2' must be between 0 and 1"):
        spec({"name": "iid"}, {"mode": "source", "val_from_test": "3/2"})
    with pytest.raises(BenchlibError, match=r"split: mode: 'leaf' is not one of"):
        spec({"name": "iid"}, {"mode": "leaf", "val": 0.1, "test": 0.1})


def test_partition_parameters_are_checked():
    with pytest.raises(
        BenchlibError, match=r"partitioner 'writers' params: writers_per_client must be given"
    ):
        check_partition_params("writers", {})
    with pytest.raises(BenchlibError, match=r"'leaf-shards' params: unknown parameter 'alpha'"):
        check_partition_params("leaf-shards", {"alpha": 0.5})
    filled = check_partition_params("dirichlet", {"alpha": 0.5, "min_size": 3})
    assert filled == {"alpha": 0.5, "min_size": 3, "max_draws": 100}
