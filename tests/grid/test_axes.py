"""Grid axes: variant experiments and datasets, their specs, and their place in the DAG."""

from __future__ import annotations

import copy

import pytest
import yaml
from conftest import REPO, ops_snakemake

from benchlib.configuration.config import Cell, Config
from benchlib.grid.axes import value_label, variants
from benchlib.primitives.errors import BenchlibError

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


def with_axes(axes: dict) -> dict:
    config = copy.deepcopy(SMOKE)
    config["experiments"]["smoke"]["axes"] = axes
    return config


def test_value_labels_are_path_safe():
    assert value_label(1.5) == "1p5" and value_label(120.5) == "120p5" and value_label(-2) == "m2"
    assert value_label({"name": "dirichlet", "alpha": 0.5}) == "dirichlet_alpha0p5"
    assert value_label([0, 2]) == "0_2" and value_label([]) == "none"
    assert [s for s, _ in variants({"ana.scale": [1.5, 3], "clients": [3]})] == [
        "ana_scale_1p5__clients_3",
        "ana_scale_3__clients_3",
    ]


def test_axes_expand_into_variant_experiments_with_their_own_specs():
    config = Config(with_axes({"ana.scale": [1.5, 120.5], "clients": [3, 4]}))
    names = sorted(config.experiments)
    assert names == [
        "smoke__ana_scale_120p5__clients_3",
        "smoke__ana_scale_120p5__clients_4",
        "smoke__ana_scale_1p5__clients_3",
        "smoke__ana_scale_1p5__clients_4",
    ]
    variant = "smoke__ana_scale_1p5__clients_3"
    dataset = config.experiment_dataset(variant)
    assert dataset == "mnist5k__ana_scale_1p5__clients_3"
    assert config.store_name(dataset) == "mnist5k"  # the store is shared
    assert config.split_name(dataset) == "mnist5k__clients_3"  # the split follows the clients
    assert config.dataset_spec(config.split_name(dataset))["clients"] == 3
    spec = config.cell_spec(Cell(variant, "ana", "fedavg", 1, 0))
    assert spec["clients"] == 3 and spec["malfunction_params"]["ana"] == {"scale": 1.5}
    assert spec["axes"] == {"ana.scale": 1.5, "clients": 3}
    assert f"tables/{variant}_ana.tex" in [f"tables/{t}.tex" for t in config.table_names()]


def test_held_out_and_partition_axes():
    config = Config(
        with_axes({"held_out": [[0], [1]], "partition": [{"name": "iid"}, {"name": "groups"}]})
    )
    variant = "smoke__held_out_1__partition_groups"
    spec = config.cell_spec(Cell(variant, "sfa", "fedavg", 1, 0))
    assert spec.held_out == (1,)
    split = config.split_name(config.experiment_dataset(variant))
    assert split == "mnist5k__partition_groups"
    assert config.dataset_spec(split)["partition"] == {"name": "groups", "min_size": 1}


def test_every_dataset_a_variant_creates_has_a_split_and_cell_inputs():
    # the split-only dataset (clients 3) of variant "ana_scale_1p5__clients_3" is its own split
    config = Config(with_axes({"ana.scale": [1.5], "clients": [3]}))
    assert sorted(config.datasets) == [
        "mnist5k",
        "mnist5k__ana_scale_1p5__clients_3",
        "mnist5k__clients_3",
    ]
    base_store, _ = config.cell_inputs("mnist5k")
    for dataset in config.datasets:
        store, split = config.cell_inputs(dataset)
        assert store == base_store  # the axes change no store
        assert split == f"results/splits/{config.split_name(dataset)}.csv"
    assert config.split_name("mnist5k__clients_3") == "mnist5k__clients_3"


@pytest.mark.parametrize(
    "axes,message",
    [
        (
            {"lr": [0.1]},
            "unknown grid axis 'lr'; choose one of: clients, corruption, held_out, partition",
        ),
        ({"clients": [1]}, "axis clients: 1 is not an int from 2 to 1000"),
        (  # an absurd count stops here, not in the split step hours later
            {"clients": [4, 10**12]},
            "axis clients: 1000000000000 is not an int from 2 to 1000; give a number of clients",
        ),
        ({"sfa.scale": [1]}, "unknown grid axis 'sfa.scale'"),
        ({"ana.scale": [1.0, 1]}, "two values have the same label"),
    ],
)
def test_bad_axes_are_clear_errors(axes, message):
    with pytest.raises(BenchlibError, match=message):
        Config(with_axes(axes))


def test_a_variant_table_resolves_in_the_dag(tmp_path):
    configfile = tmp_path / "axes.yaml"
    configfile.write_text(yaml.safe_dump(with_axes({"clients": [3]})))
    result = ops_snakemake(
        tmp_path, configfile, "-n", "--", "tables/smoke__clients_3_sfa.tex", timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout + result.stderr
    assert "results/splits/mnist5k__clients_3.csv" in out
    assert "results/data/mnist5k/manifest.json" in out
    assert "results/data/mnist5k__clients_3" not in out  # no second store


def test_axis_values_reach_the_cell_summary_and_the_collected_csv(tmp_path):
    import json

    from benchlib.report.collect import collect

    config = Config(with_axes({"ana.scale": [1.5]}))
    spec = config.cell_spec(Cell("smoke__ana_scale_1p5", "ana", "fedavg", 1, 0))
    assert spec.summary()["axis_ana_scale"] == 1.5
    client = {"client": 0, "malicious": True, "test_accuracy": 0.5, "n_train": 1, "n_val": 1}
    path = tmp_path / "metrics.json"
    path.write_text(json.dumps({"cell": spec.summary(), "clients": [{**client, "n_test": 1}]}))
    frame = collect([path])
    assert frame["axis_ana_scale"].tolist() == [1.5]
    assert list(frame.columns).index("axis_ana_scale") < list(frame.columns).index("test_accuracy")


def test_listed_reading_combinations_and_the_homes_they_imply():
    """``combinations``: only the listed reading combinations, each completed with the defaults;
    a combination whose cells a listed one shares for some method (its home) is added with only
    that method."""
    from benchlib.grid.axes import reading_combinations

    listed = [
        {},
        {"reading.dual_step": "gamma_0.01", "reading.prior": "normalised"},
        {"reading.prior": "normalised", "reading.drfa_variant": "authors"},
    ]
    result = reading_combinations(listed, ["fedavg", "drfa", "tfl"])
    assert [(s, h) for s, _, h in result] == [
        ("", None),
        ("reading_dual_step_gamma0p01__reading_prior_normalised", None),
        ("reading_prior_normalised__reading_drfa_variant_authors", None),
        ("reading_dual_step_gamma0p01", ["drfa"]),  # DRFA's cell of the second combination
        ("reading_drfa_variant_authors", ["drfa"]),  # ... and of the third
        ("reading_prior_normalised", ["tfl"]),  # TFL's of the third (DRFA's variant: not TFL's)
    ]
    assert result[0][1] == {
        "reading.dual_step": "gamma_0.1", "reading.prior": "raw", "reading.drfa_variant": "paper"
    }  # fmt: skip
    with pytest.raises(BenchlibError, match=r"only reading\.<name> axes"):
        reading_combinations([{"clients": 4}], ["fedavg"])
    with pytest.raises(BenchlibError, match="twice"):
        reading_combinations([{}, {"reading.prior": "raw"}], ["tfl"])
    with pytest.raises(BenchlibError, match="no alternative"):
        reading_combinations([{"reading.prior": "sharp"}], ["tfl"])
