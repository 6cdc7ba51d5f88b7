"""Partitioners and per-client splits: disjoint, complete, deterministic, seed-sensitive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from benchlib.data.partition import partition
from benchlib.data.split import (
    SplitSpec,
    assign_subsets,
    make_split,
    read_split,
    split_partitioner,
    write_split,
)
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.seeding import numpy_rng

LABELS = np.repeat(np.arange(10), 100)
GROUPS = np.array([f"w{i % 20:02d}" for i in range(1000)])


@pytest.mark.parametrize(
    "name,params", [("iid", {}), ("dirichlet", {"alpha": 0.5, "min_size": 20})]
)
def test_partition_is_complete_deterministic_and_seeded(name, params):
    first = partition(name, LABELS, GROUPS, 8, numpy_rng(1, "p"), params)
    again = partition(name, LABELS, GROUPS, 8, numpy_rng(1, "p"), params)
    other = partition(name, LABELS, GROUPS, 8, numpy_rng(2, "p"), params)
    assert first.shape == LABELS.shape
    assert set(np.unique(first)) == set(range(8))
    np.testing.assert_array_equal(first, again)
    assert (first != other).any()


def test_iid_sizes_differ_by_at_most_one():
    clients = partition("iid", LABELS, GROUPS, 7, numpy_rng(0, "p"))
    counts = np.bincount(clients)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 1000


def test_dirichlet_small_alpha_skews_labels_and_respects_min_size():
    clients = partition(
        "dirichlet", LABELS, GROUPS, 5, numpy_rng(0, "p"), {"alpha": 0.1, "min_size": 30}
    )
    assert np.bincount(clients).min() >= 30
    table = pd.crosstab(clients, LABELS)
    # With alpha = 0.1 most of each client's data comes from a few classes.
    top3_share = np.sort(table.to_numpy(), axis=1)[:, -3:].sum(axis=1) / table.sum(axis=1)
    assert top3_share.mean() > 0.6


def test_dirichlet_impossible_min_size_gives_clear_error():
    with pytest.raises(BenchlibError, match=r"no draw gave all 8 clients at least 400 samples"):
        partition(
            "dirichlet",
            LABELS,
            GROUPS,
            8,
            numpy_rng(0, "p"),
            {"alpha": 0.5, "min_size": 400, "max_draws": 5},
        )


def test_groups_partition_keeps_groups_whole():
    clients = partition("groups", LABELS, GROUPS, 4, numpy_rng(0, "p"))
    frame = pd.DataFrame({"group": GROUPS, "client": clients})
    assert (frame.groupby("group")["client"].nunique() == 1).all()
    assert sorted(frame["client"].unique()) == [0, 1, 2, 3]


def test_unknown_partitioner():
    with pytest.raises(BenchlibError, match="unknown partitioner 'shards'"):
        partition("shards", LABELS, GROUPS, 4, numpy_rng(0, "p"))


def test_assign_subsets_fractions_per_client():
    clients = np.repeat(np.arange(3), [100, 40, 10])
    subsets = assign_subsets(clients, 0.2, 0.3, numpy_rng(0, "s"))
    frame = pd.DataFrame({"client": clients, "subset": subsets})
    counts = frame.groupby(["client", "subset"]).size().unstack()
    assert counts.loc[0].to_dict() == {"test": 30, "train": 50, "val": 20}
    assert counts.loc[1].to_dict() == {"test": 12, "train": 20, "val": 8}
    assert counts.loc[2].to_dict() == {"test": 3, "train": 5, "val": 2}


def test_make_split_roundtrip_and_validation(mnist_store, tmp_path):
    data = load_store(mnist_store)
    spec = SplitSpec(4, "dirichlet", {"alpha": 1.0, "min_size": 100}, 0.1, 0.2, seed=3)
    table = make_split(data, spec)
    assert table["sample_id"].is_unique and len(table) == 5000
    assert set(table["sample_id"]) == set(data.index["sample_id"])
    path = tmp_path / "split.csv"
    write_split(table, path)
    again = make_split(data, spec)
    pd.testing.assert_frame_equal(table, again)
    loaded = read_split(path, data, 4)
    assert loaded[["sample_id", "client", "subset"]].equals(
        table[["sample_id", "client", "subset"]]
    )
    other = make_split(
        data, SplitSpec(4, "dirichlet", {"alpha": 1.0, "min_size": 100}, 0.1, 0.2, seed=4)
    )
    assert not other["client"].equals(table["client"])


def test_read_split_rejects_overlaps(mnist_store, tmp_path):
    data = load_store(mnist_store)
    table = make_split(data, SplitSpec(2, "iid", {}, 0.1, 0.1, seed=0))
    broken = pd.concat([table, table.iloc[[0]].assign(subset="test")])
    path = tmp_path / "split.csv"
    broken.to_csv(path, index=False)
    with pytest.raises(BenchlibError, match="more than once"):
        read_split(path, data, 2)
    with pytest.raises(BenchlibError, match=r"expected 0\.\.2"):
        write_split(table, path)
        read_split(path, data, 3)


def test_the_split_records_its_partitioner_and_an_older_split_still_reads(mnist_store, tmp_path):
    data = load_store(mnist_store)
    table = make_split(data, SplitSpec(2, "iid", {}, 0.1, 0.1, seed=0))
    path = tmp_path / "split.csv"
    write_split(table, path)
    assert path.read_text().splitlines()[0] == "sample_id,client,subset,group,partitioner"
    loaded = read_split(path, data, 2)
    assert split_partitioner(loaded) == "iid" and set(loaded["partitioner"]) == {"iid"}
    older = tmp_path / "older.csv"  # written before splits recorded their partitioner
    table.drop(columns="partitioner").to_csv(older, index=False)
    again = read_split(older, data, 2)
    assert split_partitioner(again) is None
    assert again[["sample_id", "client", "subset"]].equals(
        loaded[["sample_id", "client", "subset"]]
    )
    mixed = tmp_path / "mixed.csv"
    table.assign(partitioner=["iid", "dirichlet"] * (len(table) // 2)).to_csv(mixed, index=False)
    with pytest.raises(BenchlibError, match=r"names partitioners \['dirichlet', 'iid'\], not one"):
        read_split(mixed, data, 2)
