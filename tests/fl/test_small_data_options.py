"""The small-data diagnostics of issue 11 item 5: ``malfunction.start_round`` (rounds before it are
clean) and ``partition.shards_per_client`` of the leaf-shards partitioner (fewer clients with
more LEAF shards each)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import REPO
from helpers.femnist_sample import LEAF_SAMPLE, SHARDS, TEST_PER_SHARD, TRAIN_PER_SHARD

from benchlib.configuration.config import Cell, Config, load_config_file
from benchlib.data.partition import UNASSIGNED, check_partition_params, partition
from benchlib.data.registry import get_dataset
from benchlib.data.split import SplitSpec, make_split
from benchlib.data.store import PreparedData, load_store
from benchlib.fl.engine import CellRun
from benchlib.fl.malfunctions import MalfunctionContext, get_malfunction
from benchlib.fl.rng import torch_generator
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.seeding import numpy_rng


# ------------------------------------------------------------------------------- start_round
def context(round_index: int, start_round: int | None = None) -> MalfunctionContext:
    params: dict = {"ana": {"scale": 50.0}, "start_round": start_round or 0}
    return MalfunctionContext(
        seed=3,
        round=round_index,
        client=1,
        fresh_vector=lambda seed: torch.full((3,), float(seed % 1000)),
        params=params,
    )


@pytest.mark.parametrize("name", ["ana", "sfa", "random", "dynamic"])
def test_rounds_before_start_round_send_the_clean_model(name: str) -> None:
    w = torch.tensor([1.0, -2.0, 0.5])
    for round_index in (0, 1):
        sent, applied = get_malfunction(name)(w, context(round_index, start_round=2))
        assert applied == "none" and torch.equal(sent, w)
    sent, applied = get_malfunction(name)(w, context(2, start_round=2))
    assert applied != "none" and not torch.equal(sent, w)


def test_from_start_round_on_the_noise_is_that_of_the_undelayed_schedule() -> None:
    w = torch.tensor([1.0, -2.0, 0.5])
    delayed, _ = get_malfunction("ana")(w, context(3, start_round=2))
    eps = torch.randn(3, generator=torch_generator(3, "malfunction/ana", 3, 1))
    torch.testing.assert_close(delayed, w * (1 + 0.5 * eps))  # s = 50: w (1 + 0.5 eps)
    plain, _ = get_malfunction("ana")(w, context(3))
    assert torch.equal(delayed, plain)
    flipped, applied = get_malfunction("sfa")(w, context(0, start_round=0))
    assert applied == "sfa" and torch.equal(flipped, -w)  # default 0: from the first round


def test_start_round_is_validated_by_the_schema() -> None:
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    raw["datasets"]["mnist5k"]["malfunction"]["start_round"] = 1
    spec = Config(raw).cell_spec(Cell("smoke", "sfa", "fedavg", 1, 0))
    assert spec["malfunction_params"]["start_round"] == 1
    for bad in (-1, 1.5, "2"):
        raw["datasets"]["mnist5k"]["malfunction"]["start_round"] = bad
        with pytest.raises(BenchlibError, match="start_round"):
            Config(raw)


def test_engine_keeps_rounds_before_start_round_clean(mnist_store, smoke_split) -> None:
    """SFA from round 1 on: round 0 transmits and aggregates exactly the clean run's models;
    round 1 sends the flipped model."""
    raw = load_config_file(REPO / "config" / "smoke.yaml")
    clean = Config(raw).cell_spec(Cell("smoke", "none", "fedavg", 0, 0))
    raw["datasets"]["mnist5k"]["malfunction"]["start_round"] = 1
    late = Config(raw).cell_spec(Cell("smoke", "sfa", "fedavg", 1, 0))
    reference = CellRun(clean, mnist_store, smoke_split)
    delayed = CellRun(late, mnist_store, smoke_split)
    reference.run_round(0)
    delayed.run_round(0)
    assert delayed.history.schedule == [{"0": "none"}]
    assert torch.equal(delayed.global_vector, reference.global_vector)
    trained, _ = delayed._train_all(1, delayed.federation)
    sent = delayed._transmit(1, delayed.federation, trained)
    assert torch.equal(sent[0], -trained[0]) and torch.equal(sent[1], trained[1])
    assert delayed.history.schedule[-1] == {"0": "sfa"}


# ------------------------------------------------------------------------ shards_per_client
def test_shards_per_client_groups_consecutive_sorted_shards() -> None:
    shard = np.array(["b", "a", "c", "a", "d", "c", "b", "e"])
    labels = np.zeros(len(shard), dtype=np.int64)
    rng = numpy_rng(0, "unused")
    # sorted shards a b c d e: client 0 = {a, b}, client 1 = {c, d}, e left out
    clients = partition(
        "leaf-shards", labels, labels, 2, rng, {"shards_per_client": 2}, {"shard": shard}
    )
    assert clients.tolist() == [0, 0, 1, 0, 1, 1, 0, UNASSIGNED]
    one_each = partition("leaf-shards", labels, labels, 3, rng, {}, {"shard": shard})
    assert one_each.tolist() == [1, 0, 2, 0, UNASSIGNED, 2, 1, UNASSIGNED]
    check_partition_params("leaf-shards", {"shards_per_client": 4})
    with pytest.raises(BenchlibError, match=r"5 LEAF shards cannot fill 3 clients \(2 shard"):
        partition("leaf-shards", labels, labels, 3, rng, {"shards_per_client": 2}, {"shard": shard})
    with pytest.raises(BenchlibError, match="shards_per_client: 0 is less than the minimum of 1"):
        partition("leaf-shards", labels, labels, 2, rng, {"shards_per_client": 0}, {"shard": shard})


@pytest.fixture(scope="module")
def leaf_data(tmp_path_factory) -> PreparedData:
    out = tmp_path_factory.mktemp("leafshards") / "store"
    get_dataset("femnist_leaf").prepare(out, {"path": str(LEAF_SAMPLE)})
    return load_store(out)


def shard_writers(shard: str) -> set[str]:
    return set(json.loads((LEAF_SAMPLE / "train" / f"{shard}_train_9.json").read_text())["users"])


@pytest.mark.parametrize(("clients", "per_client"), [(4, 2), (2, 4)])
def test_femnist_sample_as_fewer_clients_with_more_shards(leaf_data, clients, per_client) -> None:
    spec = SplitSpec.from_config(
        {
            "clients": clients,
            "partition": {"name": "leaf-shards", "shards_per_client": per_client},
            "split": {"val": 0.1, "test": 0.2, "seed": 0},
        }
    )
    table = make_split(leaf_data, spec)
    assert len(table) == sum(TRAIN_PER_SHARD) + sum(TEST_PER_SHARD)  # all 8 shards used
    for client in range(clients):
        shards = range(client * per_client, (client + 1) * per_client)
        rows = table[table["client"] == client]
        assert set(rows["group"]) == set().union(*(shard_writers(SHARDS[s]) for s in shards))
        assert len(rows) == sum(TRAIN_PER_SHARD[s] + TEST_PER_SHARD[s] for s in shards)


def test_small_data_config_loads_with_both_options() -> None:
    config = Config(load_config_file(REPO / "config" / "lightyear_small_data.yaml"))
    assert config.datasets["femnist_shard2"]["partition"] == {
        "name": "leaf-shards",
        "shards_per_client": 2,
        "min_size": 1,
    }
    assert config.datasets["femnist_shard4"]["clients"] == 2
    late = config.cell_spec(Cell("shard1_late", "sfa", "lightyear", 4, 0))
    assert late["malfunction_params"]["start_round"] == 6 and late["training"]["rounds"] == 12
    assert config.datasets["femnist_shard1_e2"]["training"]["local_epochs"] == 2
