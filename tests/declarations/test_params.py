"""One declaration per parameter (benchlib.declarations.params): checks, defaults, the reference
page, and that every pluggable thing's implementation takes exactly what it declares."""

from __future__ import annotations

import copy
import dataclasses
import inspect

import jsonschema
import pytest
import yaml
from conftest import REPO

from benchlib.commands.reference import parameter_reference
from benchlib.configuration.config import Config, MethodEntry
from benchlib.data.corruptions import CORRUPTION
from benchlib.data.partition import _PARTITIONERS, partitioner_names, partitioner_params
from benchlib.data.registry import dataset_names, get_dataset
from benchlib.declarations.malfunctions import MALFUNCTIONS, MalfunctionSettings
from benchlib.declarations.params import UNSET, Param, Params, describe_type
from benchlib.declarations.settings import SplitSettings, TrainingSettings, TransformSettings
from benchlib.grid.spec import CellSpec
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import MODELS, ModelSettings
from benchlib.primitives.errors import BenchlibError
from benchlib.report.base import KINDS
from benchlib.tasks.catalog import TASKS

WIDGET = Params(
    {
        "size": Param({"type": "integer", "minimum": 1}, 3, "side length"),
        "colour": Param({"enum": ["red", "blue"]}, "red", "paint"),
        "tags": Param({"type": "array", "items": {"type": "string"}}, [], "labels"),
        "path": Param({"type": "string"}, description="optional file"),
        "name": Param({"type": "string"}, description="what it is called", required=True),
    }
)


def test_resolve_fills_defaults_and_keeps_given_values():
    assert WIDGET.resolve("widget", {"name": "w", "size": 5}) == {
        "size": 5,
        "colour": "red",
        "tags": [],
        "name": "w",
    }  # "path" has no default: absent unless given


def test_resolved_defaults_are_fresh_copies():
    first = WIDGET.resolve("widget", {"name": "a"})
    first["tags"].append("x")
    assert WIDGET.resolve("widget", {"name": "b"})["tags"] == []


def test_an_unknown_key_names_itself_the_closest_and_the_accepted_ones():
    with pytest.raises(BenchlibError) as error:
        WIDGET.resolve("widget 'w' params", {"name": "w", "colur": "red"})
    assert str(error.value) == (
        "widget 'w' params: unknown parameter 'colur' (did you mean 'colour'?); it takes: "
        "colour, name, path, size, tags"
    )
    with pytest.raises(BenchlibError, match=r"unknown parameter 'zzz'; it takes: colour"):
        WIDGET.resolve("widget", {"name": "w", "zzz": 1})
    with pytest.raises(BenchlibError, match=r"unknown parameter 'a'; it takes no parameters"):
        Params().resolve("nothing", {"a": 1})


def test_missing_required_and_wrong_types_are_named():
    with pytest.raises(BenchlibError, match=r"^widget: name must be given$"):
        WIDGET.resolve("widget", {})
    with pytest.raises(BenchlibError, match=r"^widget: size: 0 is less than the minimum of 1$"):
        WIDGET.resolve("widget", {"name": "w", "size": 0})
    with pytest.raises(BenchlibError, match=r"colour: 'green' is not one of \['red', 'blue'\]"):
        WIDGET.resolve("widget", {"name": "w", "colour": "green"})


def test_the_schema_carries_defaults_and_descriptions():
    schema = WIDGET.schema()
    assert schema["required"] == ["name"] and schema["additionalProperties"] is False
    assert schema["properties"]["size"] == {
        "type": "integer",
        "minimum": 1,
        "description": "side length",
        "default": 3,
    }
    assert "default" not in schema["properties"]["path"]


def test_types_read_as_short_phrases():
    assert describe_type({"type": "number", "minimum": 0, "maximum": 1}) == "number >= 0, <= 1"
    assert describe_type({"enum": ["a", None]}) == "one of 'a', null"
    assert describe_type({"type": ["integer", "null"], "minimum": 0}) == "integer or null >= 0"
    assert describe_type({"type": "array", "items": {"type": "integer"}}) == "array of integer"


# ------------------------------------------------------------- every declaration is sound
def _declarations() -> dict[str, Params]:
    found: dict[str, Params] = {"training": TrainingSettings.params()}
    found |= {"split": SplitSettings.params(), "transforms": TransformSettings.params()}
    found |= {"corruption": CORRUPTION}
    found |= {f"method {n}": e.params for n, e in METHODS.items()}
    found |= {f"model {n}": e.params for n, e in MODELS.items()}
    found |= {f"source {n}": get_dataset(n).params for n in dataset_names()}
    found |= {f"partitioner {n}": partitioner_params(n) for n in partitioner_names()}
    found |= {f"malfunction {n}": d.params for n, d in MALFUNCTIONS.items()}
    found |= {f"loss {t}/{n}": p for t, e in TASKS.items() for n, p in e.losses.items()}
    found |= {f"report kind {n}": k.params for n, k in KINDS.items()}
    return found


@pytest.mark.parametrize("owner", sorted(_declarations()))
def test_every_parameter_has_a_description_and_a_default_its_type_accepts(owner):
    for name, param in _declarations()[owner].items():
        assert param.description, f"{owner}: {name} has no description"
        if param.default is not UNSET:
            jsonschema.validate(param.default, dict(param.schema))
        for value in (param.by_variant or {}).values():
            jsonschema.validate(value, dict(param.schema))


def test_every_optional_report_parameter_has_a_default():
    # a kind's spec() reads every key: the ones a config may leave out are filled in
    for name, kind in KINDS.items():
        for key, param in kind.params.items():
            assert param.required or param.default is not UNSET, f"report kind {name}: {key}"


def _keywords(function) -> dict[str, inspect.Parameter]:
    skip = {"self", "num_classes", "num_outputs", "image_shape", "input_shape", "params"}
    return {
        k: p
        for k, p in inspect.signature(function).parameters.items()
        if k not in skip and p.kind is not p.VAR_KEYWORD
    }


def test_model_builders_take_exactly_the_declared_parameters():
    from benchlib.models.cnn import FemnistCNN
    from benchlib.models.registry import model_builder
    from benchlib.models.transunet import TransUNet

    classes = {"femnist_cnn": FemnistCNN, "transunet": TransUNet}  # builders pass **params on
    for name, entry in MODELS.items():
        function = classes.get(name, model_builder(name))
        keywords = _keywords(function.__init__ if name in classes else function)
        keywords.pop("in_channels", None), keywords.pop("image_size", None)  # TransUNet's shape
        assert set(keywords) == set(entry.params), name


def test_partitioners_take_exactly_the_declared_parameters():
    for name in partitioner_names():
        partitioner = _PARTITIONERS.get(name)
        keywords = set(_keywords(partitioner.function)) - {"labels", "groups", "rng"}
        assert keywords - {"num_clients", *partitioner.needs} == set(partitioner.params), name


def test_losses_take_exactly_the_declared_parameters():
    for task_name, entry in TASKS.items():
        from benchlib.tasks import get_task

        task = get_task(task_name)
        for loss, params in entry.losses.items():
            build = task.losses[loss]
            if build.__module__.startswith("torch"):  # torch's own, used without options
                assert not params, f"{task_name}/{loss}"
                continue
            assert set(_keywords(build)) == set(params), f"{task_name}/{loss}"


def test_the_malfunction_section_is_filled_for_the_named_malfunctions():
    section = MalfunctionSettings.from_config("m", {"sfa": {}})
    assert section.for_cell("ana") == {
        "placement": "first",
        "start_round": 0,
        "sfa": {},
        "ana": {"scale": 120.5},
    }
    assert MalfunctionSettings.from_config("m", {"ana": {"scale": 3}}).for_cell("ana") == {
        "placement": "first",
        "start_round": 0,
        "ana": {"scale": 3},
    }
    with pytest.raises(BenchlibError, match=r"m.ana: unknown parameter 'scal'"):
        MalfunctionSettings.from_config("m", {"ana": {"scal": 1}})


# ------------------------------------------------------------------------ the config
def test_the_config_resolves_every_entry_once_into_typed_entries_and_leaves_raw_as_given():
    raw = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    given = copy.deepcopy(raw)
    config = Config(raw)
    assert raw == given
    ds = config.datasets["mnist5k"]
    assert ds.task == "classification" and ds.held_out == ()
    assert isinstance(ds.training, TrainingSettings)
    assert ds.training.prefetch == 2 and ds.training.loss == "cross_entropy"
    assert ds.model == ModelSettings(
        "femnist_cnn", {"conv1": 4, "conv2": 8, "hidden": 32, "dropout": 0.5}, None
    )
    assert ds.partition == {"name": "iid", "min_size": 50}
    assert ds.malfunction == MalfunctionSettings("first", 0, {"ana": {"scale": 120.5}})
    assert config.methods["fedavg"].params == {"weighting": "samples", "gamma": 1.0}
    assert config.methods["local"] == MethodEntry("local", "Local", {})
    assert ds.label == "mnist5k"  # the id, when the file gives no label
    # an entry is frozen, and read by key as the YAML names it
    with pytest.raises(dataclasses.FrozenInstanceError):
        ds.clients = 3  # type: ignore[misc]
    assert ds["training"]["lr"] == ds.training.lr
    spec = config.cell_spec(config.cells("smoke")[0])
    assert isinstance(spec, CellSpec) and spec.training is ds.training
    assert spec.training.cuda_graphs is True and spec.method_params
    split = {"mode": "random", "val": 0.2, "test": 0.2, "seed": 0, "val_from_test": "1/3"}
    assert dict(ds.split) == {**split, "val_from_train": None}
    transforms = {"normalize": None, "input_size": None, "eval_crop": None, "train": []}
    assert dict(ds.transforms) == transforms
    assert ds.corruption.to_dict() == {
        "ratio": 0.0,
        "severity": 1,
        "subsets": ["train", "val"],
        "image_fraction": 1.0,
    }
    # the specs carry every section filled: what a run uses is what its hash covers
    assert spec.to_dict()["transforms"] == transforms
    assert config.dataset_spec("mnist5k")["split"] == {**split, "val_from_train": None}


@pytest.mark.parametrize(
    ("section", "value", "message"),
    [
        ("split", {"val": 0.1, "test": 0.1, "sede": 1}, "unknown parameter 'sede' .*'seed'"),
        ("split", {"mode": "source"}, "needs split.val_from_test or split.val_from_train"),
        ("split", {"val": 0.5, "test": 0.5}, "leaves no training data"),
        ("split", {"val": 0.1, "test": 0.1, "val_from_train": 0.1}, "applies only to split.mode"),
        ("split", {"mode": "source", "val_from_test": "3/2"}, "must be between 0 and 1"),
        ("transforms", {"eval_crop": 0}, "eval_crop: 0 is less than the minimum of 1"),
        ("transforms", {"train": [{"p": 0.5}]}, "'name' is a required property"),
    ],
)
def test_the_split_and_transforms_sections_name_a_bad_key(section, value, message):
    settings = {"split": SplitSettings, "transforms": TransformSettings}[section]
    with pytest.raises(BenchlibError, match=message):
        settings.from_config(section, value)


def test_a_corruption_mapping_is_checked_and_filled():
    from benchlib.data.corruptions import scenario_of

    filled = scenario_of({"ratio": 0.3, "severity": 4}).to_dict()
    assert filled == scenario_of("moderate").to_dict() == CORRUPTION.resolve("c", filled)
    with pytest.raises(BenchlibError, match=r"corruption: unknown parameter 'ratoi' .*'ratio'"):
        scenario_of({"ratoi": 0.3, "severity": 4})


def test_the_reference_lists_every_method_with_its_defaults():
    page = parameter_reference()
    assert "### `krum` (star)" in page and "| `m` | integer >= 1 | 1 |" in page
    assert "| `tau` | number >= 0, <= 1 | 0.75 (paper), 0.6 (authors) |" in page


def test_the_reference_lists_every_report_kind_with_its_defaults():
    page = parameter_reference()
    table = page.split("### `robustness_table` (table)", 1)[1].split("###", 1)[0]
    assert "| `experiment` | string | required |" in table
    assert "| `ci` | boolean | false | add a bootstrap CI" in table
    assert "| `title` | string or null | null |" in table
