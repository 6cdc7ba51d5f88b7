"""The torch-free catalog agrees with the implementations; config checks never import torch."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest
from conftest import REPO
from torchvision.transforms import v2

from benchlib.catalog import MALFUNCTIONS, METHODS, MODELS, TRANSFORMS
from benchlib.config import schema
from benchlib.errors import BenchlibError
from benchlib.registry import Registry


@pytest.mark.parametrize("name", METHODS.names())
def test_catalog_methods_match_their_classes(name):
    from benchlib.methods.base import get_method_class

    entry = METHODS.get(name)
    cls = get_method_class(name)
    assert cls.name == name and cls.topology == entry.topology
    signature = inspect.signature(cls.__init__).parameters
    accepted = {k: p for k, p in signature.items() if k not in ("self", "args", "kwargs")}
    assert set(accepted) == set(entry.params), f"{name}: class takes {sorted(accepted)}"
    # the class keeps keyword defaults for direct use (tests, notebooks): they must be the
    # declared ones, which the config fills in
    for key, param in accepted.items():
        assert param.default == entry.params[key].default, f"{name}.{key}"


def test_every_method_module_registers_only_catalog_methods():
    from benchlib.methods import base

    for module in {entry.module for _, entry in METHODS.items()}:
        importlib.import_module(f"benchlib.methods.{module}")
    assert base._METHODS.names() == METHODS.names()


def test_catalog_models_and_malfunctions_are_implemented():
    from benchlib.fl.malfunctions import malfunction_names
    from benchlib.models import registry

    for name in MODELS.names():
        importlib.import_module(f"benchlib.models.{MODELS.get(name).module}")
    assert registry._BUILDERS.names() == MODELS.names()
    assert malfunction_names() == MALFUNCTIONS.names()
    assert all(hasattr(v2, name) for name in TRANSFORMS)


def test_schema_enums_come_from_the_catalog_and_the_optimizers():
    from benchlib.fl import optim

    dataset = schema()["properties"]["datasets"]["additionalProperties"]["properties"]
    assert dataset["task"]["enum"] == ["classification", "regression", "segmentation"]
    assert set(dataset["malfunction"]["properties"]) == {"placement", "start_round", "ana"}
    assert dataset["training"]["properties"]["optimizer"]["enum"] == sorted(optim._OPTIMIZERS)


def test_loading_a_config_imports_no_torch():
    code = (
        "import sys; from benchlib.config import load_config; "
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
    with pytest.raises(BenchlibError, match="unknown widget 'b'; choose one of: a"):
        registry.get("b")


def test_method_parameters_are_checked_against_the_catalog():
    from benchlib.methods.base import build_method

    with pytest.raises(BenchlibError, match=r"method 'krum': variant: 'bogus' is not one of"):
        build_method("krum", {"variant": "bogus"})
    with pytest.raises(BenchlibError, match=r"unknown parameter 'mu'; it takes: gamma, weighting"):
        build_method("fedavg", {"mu": 1})
    assert build_method("lightyear", {"variant": "authors"}).tau == 0.6
