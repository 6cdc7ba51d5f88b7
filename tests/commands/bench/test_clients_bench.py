"""``benchlib bench clients``: its split, its counts and its table on tiny federations (no timing
is asserted)."""

from __future__ import annotations

import subprocess

import pandas as pd
import pytest
from conftest import benchlib_exe, tool_env

from benchlib.commands.bench.clients import bench_split, run_client_scaling


def test_split_gives_every_client_the_same_disjoint_rows(mnist_store, tmp_path):
    split = pd.read_csv(bench_split(tmp_path, mnist_store, clients=5, train=4, evaluate=3))
    counts = split.groupby(["client", "subset"]).size().unstack()
    assert counts.to_dict("list") == {"test": [3] * 5, "train": [4] * 5, "val": [3] * 5}
    assert split["sample_id"].is_unique  # no row is shared between clients or subsets


def test_counts_every_model_a_peer_evaluator_scores_and_prints_one_row_per_run(mnist_store):
    lines: list[str] = []
    results = run_client_scaling((2, 3), train=4, evaluate=2, store=mnist_store, out=lines.append)
    # LIGHTYEAR: each of the n receiving clients scores its own model and its n - 1 peers'
    assert {n: r["evaluations"] for n, r in results["lightyear"].items()} == {2: 4, 3: 9}
    assert {n: r["evaluations"] for n, r in results["fedavg"].items()} == {2: 0, 3: 0}
    for runs in results.values():
        for run in runs.values():
            assert 0 < run["train"] + run["aggregate"] <= run["round"]  # phases of that round
    rows = [line.split() for line in lines[2:]]
    assert [(r[0], r[1]) for r in rows] == [
        ("fedavg", "2"),
        ("lightyear", "2"),
        ("fedavg", "3"),
        ("lightyear", "3"),
    ]
    assert [r[4] for r in rows] == ["0", "4", "0", "9"] and rows[0][5] == "-"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--clients", "1"], "--clients needs at least 2 clients"),
        (["--train", "0"], "--train and --eval at least 1 row"),
    ],
)
def test_bad_sizes_are_one_line_errors(argv, message):
    done = subprocess.run(
        [benchlib_exe(), "bench", "clients", *argv],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
