"""The cell spec as a versioned contract: its JSON schema comes from the declarations, and
`benchlib run` checks a spec once and builds it without filling a default again."""

from __future__ import annotations

import copy
import json

import jsonschema
import pytest
import yaml
from conftest import REPO

from benchlib.commands.forkserver.client import spec_kernels
from benchlib.configuration.config import Config
from benchlib.declarations.settings import TrainingSettings
from benchlib.grid.spec import SPEC_VERSION, Cell, CellSpec, spec_schema
from benchlib.methods.catalog import METHODS
from benchlib.primitives.errors import BenchlibError

SMOKE = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())


@pytest.fixture(scope="module")
def spec() -> CellSpec:
    return Config(copy.deepcopy(SMOKE)).cell_spec(Cell("smoke", "ana", "lightyear", 1, 0))


def test_the_json_form_round_trips_and_keeps_its_hash(spec):
    raw = json.loads(spec.to_json())
    assert raw["version"] == SPEC_VERSION
    again = CellSpec.from_json(raw)
    assert again == spec and again.config_hash() == spec.config_hash()
    assert isinstance(again.training, TrainingSettings)


def test_the_hash_covers_the_canonical_json_that_metrics_json_records(spec):
    """The bytes every recorded hash was taken of (benchlib.primitives.io's canonical JSON), without
    the settings that only watch a run: a new hash would rerun every finished cell."""
    import hashlib

    from benchlib.primitives.io import dumps_json

    recorded = json.loads(spec.to_json())
    recorded["training"].pop("tensorboard")
    recorded["training"].pop("verify_store")
    assert spec.recorded() == recorded
    assert spec.config_hash() == hashlib.sha256(dumps_json(recorded).encode()).hexdigest()
    assert (
        spec.config_hash()
        != Config(copy.deepcopy(SMOKE))
        .cell_spec(Cell("smoke", "ana", "lightyear", 1, 1))
        .config_hash()
    )


def test_the_schema_is_generated_from_the_declarations(spec):
    schema = spec_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(spec.to_json()), schema)
    # every training key is required: a spec lacks none
    assert set(schema["properties"]["training"]["required"]) == set(TrainingSettings.field_names())
    # a method's parameters are checked by its own declaration (LIGHTYEAR's tau in [0, 1])
    lightyear = next(
        c["then"]["properties"]["method_params"]
        for c in schema["allOf"]
        if c["if"]["properties"].get("method") == {"const": "lightyear"}
    )
    assert lightyear["properties"]["tau"]["maximum"] == 1
    assert set(lightyear["required"]) == set(METHODS.get("lightyear").params)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.pop("axes"), r"--spec lacks axes: a stale spec; regenerate it"),
        (
            lambda r: r["training"].pop("tensorboard"),
            r"--spec training: 'tensorboard' is a required property: a stale spec; regenerate",
        ),
        (lambda r: r.update(version=0), r"cell spec version 0, this benchlib reads version 1"),
        (
            lambda r: r["method_params"].update(tau=1.5),
            r"--spec method_params: tau: 1.5 is greater than the maximum of 1",
        ),
        (
            lambda r: r["method_params"].pop("gamma"),
            r"--spec method_params: 'gamma' is a required property: a stale spec",
        ),
        (lambda r: r.update(method="lightyer"), r"unknown method 'lightyer' \(did you mean"),
    ],
)
def test_a_bad_or_stale_spec_is_one_error_line(spec, change, message):
    raw = json.loads(spec.to_json())
    change(raw)
    with pytest.raises(BenchlibError, match=message) as info:
        CellSpec.from_json(raw)
    assert "\n" not in str(info.value)


def test_the_fork_server_client_reads_only_the_cpu_kernels(spec, tmp_path):
    text = spec.to_json()
    assert spec_kernels(text) == "portable"
    (tmp_path / "spec.json").write_text(text)
    assert spec_kernels(f"@{tmp_path / 'spec.json'}") == "portable"
    assert spec_kernels(json.dumps({"training": {"cpu_kernels": "native"}})) == "native"
    # anything else: the cell runs in this process, where benchlib run names the problem
    assert spec_kernels(json.dumps({"training": {"cpu_kernels": "fast"}})) is None
    for text in ("{}", "[1]", "{", "[" * 100_000, "NaN", f"@{tmp_path / 'missing.json'}"):
        assert spec_kernels(text) is None
