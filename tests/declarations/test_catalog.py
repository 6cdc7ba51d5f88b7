"""The torch-free declarations name working implementations; config checks never import torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO
from torchvision.transforms import v2

from benchlib.configuration.config import schema
from benchlib.declarations.malfunctions import MALFUNCTIONS
from benchlib.declarations.registry import Registry
from benchlib.declarations.settings import TRANSFORMS
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import MODELS
from benchlib.primitives.errors import BenchlibError


@pytest.mark.parametrize("name", METHODS.names())
def test_every_declared_method_builds_from_its_declaration_alone(name):
    """The declaration is complete: every variant builds with no parameter given, the class it
    names has the declared topology, and the instance carries the declared name."""
    from helpers.builders import build_method

    from benchlib.methods.base import get_method_class

    declared = METHODS.get(name)
    assert get_method_class(name).topology == declared.topology
    for variant in declared.variants or (None,):
        method = build_method(name, {} if variant is None else {"variant": variant})
        assert method.name == name


def test_variant_dependent_defaults_are_filled_in_the_spec():
    """No ``null`` placeholder: the resolved parameters carry the value the method uses."""
    resolve = METHODS.get("lightyear").params.resolve
    assert resolve("lightyear", {})["tau"] == 0.75
    assert resolve("lightyear", {"variant": "authors"})["tau"] == 0.6
    assert resolve("lightyear", {"variant": "authors", "tau": 0.5})["tau"] == 0.5
    assert METHODS.get("afa").params.resolve("afa", {"variant": "authors"})["delta_xi"] == 0.25
    assert METHODS.get("asmr").params.resolve("asmr", {})["momentum"] == 0.7


def test_declared_models_and_malfunctions_name_their_implementations():
    from benchlib.fl.malfunctions import get_malfunction
    from benchlib.models.registry import model_builder

    for name in MODELS.names():
        assert callable(model_builder(name)), name
    for name in MALFUNCTIONS.names():
        assert callable(get_malfunction(name)), name
    assert all(hasattr(v2, name) for name in TRANSFORMS)


def test_a_declaration_naming_a_missing_implementation_fails_with_one_line():
    from benchlib.methods.base import get_method_class
    from benchlib.methods.catalog import declare_method

    declare_method("broken_for_test", "benchlib.methods.no_such_module:X", "star")
    try:
        with pytest.raises(BenchlibError, match=r"method 'broken_for_test': cannot import"):
            get_method_class("broken_for_test")
    finally:
        METHODS._entries.pop("broken_for_test")


def test_schema_enums_come_from_the_catalog_and_the_optimizers():
    from benchlib.fl import optim

    dataset = schema()["properties"]["datasets"]["additionalProperties"]["properties"]
    assert dataset["task"]["enum"] == ["classification", "regression", "segmentation"]
    assert set(dataset["malfunction"]["properties"]) == {"placement", "start_round", "ana"}
    assert dataset["training"]["properties"]["optimizer"]["enum"] == sorted(optim._OPTIMIZERS)


def test_loading_a_config_imports_no_torch():
    code = (
        "import sys; from benchlib.configuration.config import load_config; "
        f"load_config({str(REPO / 'config' / 'demo.yaml')!r}); "
        "print(sorted(m for m in ('torch', 'torchvision', 'monai', 'timm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_registry_rejects_duplicates_and_names_choices():
    registry: Registry[int] = Registry("widget")
    registry.add("a", 1)
    with pytest.raises(ValueError, match="widget 'a' registered twice"):
        registry.add("a", 2)
    with pytest.raises(BenchlibError, match="unknown widget 'b'; choose one of: a; no plugins"):
        registry.get("b")
    registry.add("fedavg", 3)
    with pytest.raises(
        BenchlibError, match="unknown widget 'fedavgg' \\(did you mean 'fedavg'\\?\\)"
    ):
        registry.get("fedavgg")


def test_method_parameters_are_checked_against_the_catalog():
    from helpers.builders import build_method

    with pytest.raises(BenchlibError, match=r"method 'krum': variant: 'bogus' is not one of"):
        build_method("krum", {"variant": "bogus"})
    with pytest.raises(BenchlibError, match=r"unknown parameter 'mu'; it takes: gamma, weighting"):
        build_method("fedavg", {"mu": 1})
    assert build_method("lightyear", {"variant": "authors"}).tau == 0.6
