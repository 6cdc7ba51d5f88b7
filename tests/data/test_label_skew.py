"""FedAgain's label-skew partitioner (paper Eq. 14): exact counts by hand, and its properties."""

from __future__ import annotations

import numpy as np
import pytest

from benchlib.data.partition import check_partition_params, partition


def _counts(clients, labels, k, c):
    table = np.zeros((k, c), dtype=int)
    np.add.at(table, (clients, labels), 1)
    return table


def test_eq14_balanced_counts():
    # K = 4, C = 4, 100 per class: class c is primary on clients c - 1 and c (cyclic pairs), so
    # n = 0.8 * 100 / 2 = 40 there and 0.2 * 100 / 2 = 10 on the two others.
    labels = np.repeat(np.arange(4), 100)
    rng = np.random.default_rng(0)
    clients = partition("label-skew", labels, np.array([""] * 400), 4, rng)
    expected = np.array([[40, 40, 10, 10], [10, 40, 40, 10], [10, 10, 40, 40], [40, 10, 10, 40]])
    assert (_counts(clients, labels, 4, 4) == expected).all()


def test_eq14_rounding_by_largest_remainder():
    # K = 5, C = 3, 10 per class; primaries {0,1}, {1,2}, {2,0}, {0,1}, {1,2}.
    # class 0: primary on 0, 2, 3 -> 8/3 = 2.67 each, 2/2 = 1 on 1 and 4 -> floors 2,1,2,2,1 (8),
    #   the 2 missing go to the largest remainders (0.67 on 0, 2, 3; ties -> lower id): 0 and 2.
    # class 1: primary on 0, 1, 3, 4 -> 8/4 = 2 each; client 2: 2/1 = 2.
    # class 2: primary on 1, 2, 4 -> 2.67; 1 on 0 and 3 -> floors 1,2,2,1,2, +1 for 1 and 2.
    labels = np.repeat(np.arange(3), 10)
    clients = partition("label-skew", labels, np.array([""] * 30), 5, np.random.default_rng(3))
    expected = np.array([[3, 2, 1], [1, 2, 3], [3, 2, 3], [2, 2, 1], [1, 2, 2]])
    assert (_counts(clients, labels, 5, 3) == expected).all()


@pytest.mark.parametrize("assignment", ["cyclic", "random"])
def test_properties_on_unbalanced_classes(assignment):
    rng = np.random.default_rng(11)
    labels = rng.integers(0, 6, size=3000)  # kidney-like: 6 classes, 10 clients
    groups = np.array([""] * len(labels))
    params = {"assignment": assignment}
    a = partition("label-skew", labels, groups, 10, np.random.default_rng(5), params)
    b = partition("label-skew", labels, groups, 10, np.random.default_rng(5), params)
    assert (a == b).all()  # deterministic per seed
    table = _counts(a, labels, 10, 6)
    assert (table.sum(axis=0) == np.bincount(labels, minlength=6)).all()  # nothing dropped
    for c in range(6):
        column = table[:, c]
        holders = column >= column.max() - 1  # primary clients share 80 % of the class
        n = column.sum()
        assert abs(column[holders].sum() - 0.8 * n) <= holders.sum()
        assert column[holders].max() - column[holders].min() <= 1
        others = column[~holders]
        assert others.max() - others.min() <= 1  # the 20 % split equally
    # every client's two largest classes are its primaries
    top2 = np.sort(table, axis=1)[:, -2:].sum(axis=1)
    assert (top2 > 0.5 * table.sum(axis=1)).all()


def test_bad_parameters_are_named():
    labels = np.repeat(np.arange(3), 5)
    groups = np.array([""] * 15)
    with pytest.raises(Exception, match=r"partition.primary must be in 1..2"):
        partition("label-skew", labels, groups, 3, np.random.default_rng(0), {"primary": 3})
    with pytest.raises(Exception, match="unknown parameter 'alpha'"):
        check_partition_params("label-skew", {"alpha": 1})


def _primary_shares(counts, assignment, num_clients):
    labels = np.repeat(np.arange(len(counts)), counts)
    clients = partition(
        "label-skew", labels, np.array([""] * len(labels)), num_clients,
        np.random.default_rng(0), {"assignment": assignment},
    )  # fmt: skip
    table = _counts(clients, labels, num_clients, len(counts))
    stride = max(1, len(counts) // num_clients) if assignment == "cyclic" else 1
    primary = [[(k * stride + j) % len(counts) for j in range(2)] for k in range(num_clients)]
    shares = np.array([table[k, primary[k]].sum() / table[k].sum() for k in range(num_clients)])
    return table, shares


def test_five_clients_ten_classes_spread_primaries_exact_counts():
    # K = 5 < C = 10: stride 2, client k's primaries are 2k, 2k + 1, each class primary on one
    # client: 0.8 * 5000 = 4000 there, 0.2 * 5000 / 4 = 250 on each other client; a client holds
    # 2 * 4000 + 8 * 250 = 10000 samples, 80 % of them primary (Eq. 14's aim).
    table, shares = _primary_shares([5000] * 10, "cyclic", 5)
    expected = np.full((5, 10), 250)
    for k in range(5):
        expected[k, 2 * k : 2 * k + 2] = 4000
    assert (table == expected).all()
    assert shares == pytest.approx([0.8] * 5)


# MNIST's training-set class counts (torchvision), the paper's Figure 12/13 MNIST partitions
MNIST_TRAIN = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]


@pytest.mark.parametrize("num_clients", [5, 10, 20])
def test_primary_share_near_eighty_percent_on_mnist_counts(num_clients):
    _, shares = _primary_shares(MNIST_TRAIN, "cyclic", num_clients)
    assert shares.min() > 0.786 and shares.max() < 0.812  # measured 78.7-81.1 % (docs)


def test_adjacent_assignment_at_five_clients_keeps_the_old_low_shares():
    # adjacent primaries {k, k+1}: classes 6-9 are primary nowhere (split equally), so a
    # client's two primaries are only 43.6-53.3 % of its data (docs/papers/fedagain.md)
    _, shares = _primary_shares([5000] * 10, "adjacent", 5)
    assert shares.min() == pytest.approx(0.436, abs=5e-4)
    assert shares.max() == pytest.approx(0.533, abs=5e-4)
