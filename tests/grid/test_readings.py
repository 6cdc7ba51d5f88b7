"""Readings: every declaration names declared parameters with accepted values, a config sweeps
them as grid axes (the default left out of the name, unconcerned methods run once), bad sweeps
stop with one line, and the generated page lists every reading with its default."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import yaml
from conftest import REPO

from benchlib.commands.docs_gen import readings as readings_page
from benchlib.configuration.config import Cell, Config, load_config
from benchlib.grid.readings import READINGS, Alternative, Reading, check_reading
from benchlib.primitives.errors import BenchlibError

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


@pytest.mark.parametrize("name", READINGS.names())
def test_every_declared_reading_names_declared_params_with_accepted_values(name):
    reading = READINGS.get(name)
    check_reading(reading)
    assert reading.alternative(reading.default).name == reading.default
    assert reading.quotes and reading.why and reading.affects


def test_the_project_readings_are_declared():
    assert {"dual_step", "prior", "lambda_start", "baseline_code", "corruption_subsets",
            "corruption_types"} <= set(READINGS.names())  # fmt: skip
    dual = READINGS.get("dual_step")
    assert [a.name for a in dual.alternatives] == ["gamma_0.1", "gamma_0.01", "gamma_0.001"]
    assert dual.alternative("gamma_0.01").methods == {
        "drfa": {"gamma": 0.01},
        "tfl": {"lr_lambda": 0.01},
    }
    prior = READINGS.get("prior")
    assert prior.alternative("normalised").methods == {"tfl": {"normalized_betweenness": True}}
    # the defaults are what the methods run without a reading
    from benchlib.methods.catalog import METHODS

    assert METHODS.get("drfa").params["gamma"].default == 0.1
    assert METHODS.get("tfl").params["lr_lambda"].default == 0.1
    assert METHODS.get("tfl").params["normalized_betweenness"].default is False
    # lambda's start: uniform (the methods' default) or the DRFA authors' sizes
    start = READINGS.get("lambda_start")
    assert METHODS.get("tfl").params["lambda_start"].default == "uniform"
    assert [(a.name, a.methods) for a in start.alternatives] == [
        ("uniform", {"drfa": {"lambda_start": "uniform"}, "tfl": {"lambda_start": "uniform"}}),
        ("sizes", {"drfa": {"lambda_start": "sizes"}, "tfl": {"lambda_start": "sizes"}}),
    ]
    assert READINGS.get("corruption_types").not_offered  # 16 types: named, not offered


@pytest.mark.parametrize(
    ("alternative", "error"),
    [
        (Alternative("x", "-", methods={"tfl": {"lr_lamda": 0.1}}), "unknown parameter 'lr_lamda'"),
        (Alternative("x", "-", methods={"tfl": {"lr_lambda": -1}}), "lr_lambda: -1 is less than"),
        (Alternative("x", "-", methods={"tfll": {"q": 0.1}}), "unknown method 'tfll'"),
        (Alternative("x", "-", dataset={"corruption": {"subsets": ["test"]}}), "subsets"),
        (Alternative("x", "-", dataset={"clients": 3}), "dataset setting 'clients' cannot"),
    ],
)  # fmt: skip
def test_a_reading_with_an_undeclared_or_rejected_setting_fails(alternative, error):
    reading = dataclasses.replace(
        READINGS.get("dual_step"), alternatives=(alternative,), default="x"
    )
    with pytest.raises(BenchlibError, match=error) as info:
        check_reading(reading)
    assert str(info.value).startswith("reading dual_step, alternative x")


def tfl_config(axes: dict, **tfl_params) -> dict:
    config = copy.deepcopy(SMOKE)
    config["methods"] = {
        "fedavg": {"label": "FedAvg"},
        "drfa": {"label": "DRFA"},
        "tfl": {"label": "TFL", **({"params": tfl_params} if tfl_params else {})},
        "tfl_km": {"method": "tfl", "label": "TFL-KM", "params": {"clusters": 2}},
    }
    config["experiments"]["smoke"].update(
        methods=["fedavg", "drfa", "tfl", "tfl_km"], malfunctions=["sfa"], k=[0], seeds=[0, 1]
    )
    config["experiments"]["smoke"]["axes"] = axes
    return config


SWEEP = {
    "reading.dual_step": ["gamma_0.1", "gamma_0.01"],
    "reading.prior": ["raw", "normalised"],
}


def test_a_reading_sweep_names_variants_by_their_departures_from_the_default():
    config = Config(tfl_config(SWEEP))
    assert list(config.experiments) == [
        "smoke",
        "smoke__reading_prior_normalised",
        "smoke__reading_dual_step_gamma0p01",
        "smoke__reading_dual_step_gamma0p01__reading_prior_normalised",
    ]
    both = config.experiments["smoke__reading_dual_step_gamma0p01__reading_prior_normalised"]
    assert both["axes_values"] == {"reading.dual_step": "gamma_0.01", "reading.prior": "normalised"}
    assert both["readings"] == {"dual_step": "gamma_0.01", "prior": "normalised"}
    assert config.experiments["smoke"]["axes_values"] == {}  # the default: the experiment itself
    assert config.experiments["smoke"]["readings"] == {"dual_step": "gamma_0.1", "prior": "raw"}


def test_methods_a_reading_does_not_concern_are_run_once():
    config = Config(tfl_config(SWEEP))
    cells = {c for e in config.experiments for c in config.cells(e)}
    by_method = {m: sorted({c.experiment for c in cells if c.method == m}) for m in
                 ("fedavg", "drfa", "tfl", "tfl_km")}  # fmt: skip
    assert by_method["fedavg"] == ["smoke"]  # neither reading concerns FedAvg
    assert by_method["drfa"] == ["smoke", "smoke__reading_dual_step_gamma0p01"]  # no prior
    assert len(by_method["tfl"]) == len(by_method["tfl_km"]) == 4  # both readings
    assert len(cells) == 2 * (1 + 2 + 4 + 4)  # 2 seeds
    # a variant's table reads the shared cells
    variant = "smoke__reading_dual_step_gamma0p01__reading_prior_normalised"
    assert Cell("smoke", "none", "fedavg", 0, 1) in config.cells(variant)
    assert Cell("smoke__reading_dual_step_gamma0p01", "none", "drfa", 0, 1) in config.cells(variant)


def test_a_reading_sets_the_parameters_of_every_method_id_of_its_method():
    config = Config(tfl_config(SWEEP))
    variant = "smoke__reading_dual_step_gamma0p01__reading_prior_normalised"
    spec = config.cell_spec(Cell(variant, "none", "tfl_km", 0, 0))
    params = spec["method_params"]
    assert (params["lr_lambda"], params["normalized_betweenness"], params["clusters"]) == (
        0.01,
        True,
        2,  # the method entry's own parameter stays
    )
    drfa = config.cell_spec(Cell("smoke__reading_dual_step_gamma0p01", "none", "drfa", 0, 0))
    assert drfa["method_params"]["gamma"] == 0.01
    assert drfa["axes"] == {"reading.dual_step": "gamma_0.01"}
    # the default reading's cells are the experiment's cells without a sweep (same spec)
    plain = tfl_config({})
    del plain["experiments"]["smoke"]["axes"]
    for method in ("fedavg", "drfa", "tfl"):
        cell = Cell("smoke", "none", method, 0, 0)
        assert config.cell_spec(cell) == Config(plain).cell_spec(cell)


@pytest.mark.parametrize(
    ("axes", "params", "error"),
    [
        ({"reading.dual_step": ["gamma_0.01"]}, {}, "must list the reading's default 'gamma_0.1'"),
        ({"reading.dual_step": ["gamma_0.1", "gamma_1"]}, {}, "no alternative 'gamma_1'"),
        ({"reading.dual_stp": ["gamma_0.1"]}, {}, "unknown reading 'dual_stp'"),
        ({"reading.dual_step": ["gamma_0.1"]}, {"lr_lambda": 0.5}, "methods.tfl sets lr_lambda"),
    ],
)  # fmt: skip
def test_bad_reading_sweeps_stop_with_one_line(axes, params, error):
    with pytest.raises(BenchlibError, match=error) as info:
        Config(tfl_config(axes, **params))
    assert str(info.value).startswith("experiment smoke: ")
    assert "\n" not in str(info.value)


def test_a_dataset_reading_gives_the_variant_its_own_dataset_entry():
    config = copy.deepcopy(SMOKE)
    config["datasets"]["mnist5k"]["corruption"] = "light"
    config["experiments"]["smoke"]["axes"] = {
        "reading.corruption_subsets": ["local_data", "train_only"]
    }
    loaded = Config(config)
    variant = "smoke__reading_corruption_subsets_trainonly"
    assert sorted(loaded.experiments) == ["smoke", variant]
    dataset = loaded.experiment_dataset(variant)
    assert dataset == "mnist5k__reading_corruption_subsets_trainonly"
    assert loaded.datasets[dataset].corruption.subsets == ("train",)
    assert loaded.datasets["mnist5k"].corruption.subsets == ("train", "val")
    assert loaded.split_name(dataset) == "mnist5k"  # the same split
    # every method depends on the data: nothing is shared
    assert all(c.experiment == variant for c in loaded.cells(variant))


def test_the_tpt48_config_lists_the_decisive_combinations_without_duplicating_baselines():
    config = load_config(REPO / "config" / "tfl_tpt48.yaml")
    cells = {c for e in config.experiments for c in config.cells(e)}
    methods = ("fedavg", "fedprox", "erm", "drfa", "tfl")
    count = {m: sum(c.method == m for c in cells) for m in methods}
    # 2 experiments x 5 seeds; 8 listed combinations: D, C = (gamma_0.01, normalised), C with
    # draws without replacement / DRFA as coded / current models / per-row scaling, D with
    # DRFA as coded / current models. TFL: D, C and the four C variants but DRFA's, D + current
    # (6 + 1 = 7, minus the DRFA-only ones: 6); DRFA: gamma 0.1 and 0.01, draws without
    # replacement at 0.01, authors at 0.1 and 0.01 (5)
    assert count == {"fedavg": 10, "fedprox": 10, "erm": 10, "drfa": 50, "tfl": 60}
    listed = [e for e, x in config.experiments.items() if x["base"] == "tpt48_ew"]
    assert sum(not config.experiments[e]["implied"] for e in listed) == 8
    # a combination not listed holds only the cells a listed one reads: DRFA at gamma 0.01
    # with the raw prior (the prior does not concern DRFA)
    implied = config.experiments["tpt48_ew__reading_dual_step_gamma0p01"]
    assert implied["implied"] and implied["methods"] == ["drfa"]
    closest = "tpt48_ew__reading_dual_step_gamma0p01__reading_prior_normalised"
    assert {(c.method, c.experiment) for c in config.cells(closest) if c.seed == 0} == {
        ("fedavg", "tpt48_ew"), ("fedprox", "tpt48_ew"), ("erm", "tpt48_ew"),
        ("drfa", "tpt48_ew__reading_dual_step_gamma0p01"), ("tfl", closest),
    }  # fmt: skip
    report = config.reports["tfl_table4_readings"]
    assert len(report.spec["combinations"]) == 8
    assert len(report.inputs) == 1 + 130  # ERM is not read: 140 cells less its 10
    assert report.spec["min_tau"] == 0.7 and report.spec["min_columns"] == 3
    assert config.reports["tfl_table4_readings"].targets[0] == "reports/tfl_table4_readings.md"
    # the paper table reads the default reading's cells, as before the sweep
    assert {c.experiment for c in config.cells("tpt48_ew")} == {"tpt48_ew"}


def test_the_generated_page_lists_every_reading_with_its_default():
    page = readings_page()
    for name, reading in READINGS.items():
        assert f"## {name}" in page
        assert f"| [`{name}`](#{name.replace('_', '-')}) |" in page
        assert f"Default `{reading.default}`:" in page
        for alt in reading.alternatives:
            assert f"`{alt.name}`" in page
    assert "`tfl`: `lr_lambda = 0.01`" in page
    assert (REPO / "docs" / "papers" / "readings.md").read_text() == page


def test_a_plugin_reading_is_one_declaration():
    """A reading is a registry entry: declaring one makes it a grid axis (checked, then removed
    from this process's registry)."""
    from benchlib.grid.axes import get_axis
    from benchlib.grid.readings import declare_reading

    reading = Reading(
        name="test_q",
        paper="TFL",
        question="q?",
        quotes=("none",),
        alternatives=(
            Alternative("q0", "-", methods={"tfl": {"q": 0.0}}),
            Alternative("q01", "-", methods={"tfl": {"q": 0.1}}),
        ),
        default="q01",
        why="-",
        affects="-",
    )
    declare_reading(reading)
    try:
        assert get_axis("reading.test_q").reading is reading
        config = Config(tfl_config({"reading.test_q": ["q01", "q0"]}))
        spec = config.cell_spec(Cell("smoke__reading_test_q_q0", "none", "tfl", 0, 0))
        assert spec["method_params"]["q"] == 0.0
    finally:
        READINGS._entries.pop("test_q")


def test_check_config_counts_shared_cells_once(capsys):
    from benchlib.commands.cli import main

    main(["check-config", str(REPO / "config" / "tfl_tpt48.yaml")])
    assert capsys.readouterr().out.strip().endswith("valid; 22 experiments, 140 cells")


def test_a_variants_collected_results_list_its_shared_cells_under_its_name(tmp_path):
    """FedAvg's cell of ``smoke`` is shared by the variant at gamma 0.01; the variant's collected
    CSV (its tables read it by experiment name) lists it under the variant's name."""
    from benchlib.report.collect import collect

    paths = []
    for experiment, method in (("smoke", "fedavg"), ("smoke__reading_dual_step_gamma0p01", "drfa")):
        cell = {"experiment": experiment, "dataset": "mnist5k", "malfunction": "none"}
        cell |= {"method_id": method, "method": method, "k": 0, "seed": 0}
        path = tmp_path / experiment / "metrics.json"
        path.parent.mkdir()
        clients = [{"client": 0, "malicious": False, "test_accuracy": 0.5}]
        path.write_text(json.dumps({"cell": cell, "clients": clients}))
        paths.append(path)
    variant = "smoke__reading_dual_step_gamma0p01"
    assert set(collect(paths)["experiment"]) == {"smoke", variant}
    assert set(collect(paths, variant)["experiment"]) == {variant}
    rule = (REPO / "workflow" / "rules" / "report.smk").read_text()
    assert rule.count("benchlib collect --experiment {wildcards.experiment} ") == 2


# ------------------------------------------------------------------ the TFL readings, traced
# reading -> alternative -> {registered method: {attribute of the built object: value}}
BUILT = {
    "embedding": {
        "latest": {"tfl": {"embedding_age": "latest"}},
        "recent": {"tfl": {"embedding_age": "recent"}},
        "current": {"tfl": {"embedding_age": "current"}},
    },
    "similarity_scaling": {
        "minmax": {"tfl": {"scaling": "minmax"}},
        "row": {"tfl": {"scaling": "row"}},
        "max": {"tfl": {"scaling": "max"}},
    },
    "client_draws": {
        "with_replacement": {"tfl": {"draws": "with_replacement"},
                             "drfa": {"draws": "with_replacement"}},
        "without_replacement": {"tfl": {"draws": "without_replacement"},
                                "drfa": {"draws": "without_replacement"}},
    },
    "dual_schedule": {
        "tau_decay": {"tfl": {"local_step_scale": True, "lr_decay": 0.9},
                      "drfa": {"local_step_scale": True, "gamma_decay": 0.9}},
        "no_tau": {"tfl": {"local_step_scale": False, "lr_decay": 0.9},
                   "drfa": {"local_step_scale": False, "gamma_decay": 0.9}},
        "no_decay": {"tfl": {"local_step_scale": True, "lr_decay": 1.0},
                     "drfa": {"local_step_scale": True, "gamma_decay": 1.0}},
    },
    "drfa_variant": {
        "paper": {"drfa": {"variant": "paper"}},
        "authors": {"drfa": {"variant": "authors"}},
    },
    "pairs": {
        "unordered": {"tfl": {"ordered_pairs": False}},
        "ordered": {"tfl": {"ordered_pairs": True}},
    },
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BUILT))
def test_each_tfl_reading_reaches_the_built_method(name):
    """Config -> variant experiment -> cell spec -> the TFL / DRFA object the engine builds:
    every alternative of the reading sets the attributes the method reads, the cell's recorded
    readings name it, and a method the reading does not concern shares the default's cells."""
    from benchlib.grid.readings import cell_readings
    from benchlib.methods.base import build_method

    reading = READINGS.get(name)
    assert [a.name for a in reading.alternatives] == list(BUILT[name])
    config = Config(tfl_config({f"reading.{name}": list(BUILT[name])}))
    for alternative, expected in BUILT[name].items():
        suffix = "" if alternative == reading.default else f"__reading_{name}_"
        variant = next(
            e for e, x in config.experiments.items()
            if x["readings"] == {name: alternative} and e.startswith("smoke" + suffix)
        )  # fmt: skip
        for method_id in ("tfl", "drfa", "tfl_km"):
            cell = next(c for c in config.cells(variant) if c.method == method_id)
            spec = config.cell_spec(cell)
            built = build_method(spec["method"], spec["method_params"])
            recorded = cell_readings(spec["method"], spec["method_params"])
            for attribute, value in expected.get(spec["method"], {}).items():
                assert getattr(built, attribute) == value, (name, alternative, attribute)
            if spec["method"] in reading.methods:
                assert recorded[name] == alternative
                assert cell.experiment == variant
            else:  # not concerned: the default's cell, and no such reading recorded
                assert name not in recorded and "__reading_" + name not in cell.experiment


def test_every_cell_records_the_alternative_of_every_reading_that_concerns_it(tmp_path):
    """metrics.json ``readings``: defaults included, a directly set parameter matching no
    alternative as (other)."""
    from helpers.task_stores import groups_split, regression_store, task_cell_spec

    from benchlib.fl.engine import run_cell
    from benchlib.grid.readings import cell_readings
    from benchlib.methods.catalog import METHODS

    store = regression_store(tmp_path / "store", n=80, groups=4)
    split = groups_split(store, tmp_path / "split.csv", clients=4)
    params = METHODS.get("tfl").params.resolve("tfl", {"embedding": "current"})
    spec = task_cell_spec("regression", "tfl", method_params=params)
    metrics = run_cell(spec, store, split, tmp_path / "m.json", tmp_path / "ck")
    assert metrics["readings"] == {
        "client_draws": "with_replacement", "dual_schedule": "tau_decay",
        "dual_step": "gamma_0.1", "embedding": "current", "lambda_start": "uniform",
        "pairs": "unordered", "prior": "raw", "similarity_scaling": "minmax",
    }  # fmt: skip
    assert json.loads((tmp_path / "m.json").read_text())["readings"] == metrics["readings"]
    drfa = METHODS.get("drfa").params.resolve("drfa", {"gamma": 0.05})
    assert cell_readings("drfa", drfa) == {
        "client_draws": "with_replacement", "drfa_variant": "paper",
        "dual_schedule": "tau_decay", "dual_step": "(other)", "lambda_start": "uniform",
    }  # fmt: skip
    assert cell_readings("fedprox", METHODS.get("fedprox").params.resolve("p", {})) == {}
