"""The two walks docs/develop/architecture.md describes, measured: where
``training.client_batching`` travels from the YAML to the engine's decision (also under the fork
server), and where LIGHTYEAR's ``tau`` is validated. A change that adds a file, a check or a
conversion to a walk fails here until the page says so.

The rule both walks keep: a value is checked once in each process that builds it from text, by
the schema generated from its declaration (Snakemake's when the config loads, ``benchlib run``'s
at the run boundary), and never in a process that only reads it (the fork-server client)."""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import REPO

from benchlib.commands.forkserver.client import spec_kernels
from benchlib.configuration.config import Config
from benchlib.declarations.settings import TrainingSettings
from benchlib.grid.spec import Cell, CellSpec

SRC = REPO / "src" / "benchlib"
PAGE = REPO / "docs" / "develop" / "architecture.md"
KEY = "client_batching"


def _carries(value: Any) -> bool:
    """Whether ``value`` is the setting's carrier: the typed section, the cell spec, a mapping
    holding the key (or a ``training`` mapping holding it), or JSON or YAML text naming it."""
    if isinstance(value, TrainingSettings | CellSpec):
        return True
    if isinstance(value, str):
        return re.search(KEY + r"""["']?\s*:""", value) is not None
    if isinstance(value, dict):
        return KEY in value or (
            isinstance(value.get("training"), dict) and KEY in value["training"]
        )
    return False


class Walk:
    """Records the benchlib files whose functions hold the carrier, the schema validations
    that see the setting, and the typed sections built and JSON texts written."""

    def __init__(self) -> None:
        self.files: set[str] = set()
        self.checks: list[str] = []  # the file of each check, in order
        self.typed = 0
        self.json = 0

    def profile(self, frame: Any, event: str, _arg: Any) -> None:
        path = frame.f_code.co_filename
        if event != "return" or not path.startswith(str(SRC)):
            return
        if any(_carries(v) for v in frame.f_locals.values()):
            self.files.add(Path(path).relative_to(SRC).as_posix())


@pytest.fixture
def walk(monkeypatch):
    found = Walk()
    validate = jsonschema.Draft202012Validator.iter_errors
    construct = TrainingSettings.__init__
    to_json = CellSpec.to_json

    def iter_errors(self, instance, *args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename  # a benchlib check, not a nested step
        if caller.startswith(str(SRC)) and KEY in json.dumps(instance, default=str):
            found.checks.append(Path(caller).relative_to(SRC).as_posix())
        return validate(self, instance, *args, **kwargs)

    def init(self, *args, **kwargs):
        found.typed += 1
        construct(self, *args, **kwargs)

    def write(self):
        found.json += 1
        return to_json(self)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", iter_errors)
    monkeypatch.setattr(TrainingSettings, "__init__", init)
    monkeypatch.setattr(CellSpec, "to_json", write)
    return found


def traced(walk: Walk, step) -> Any:
    sys.setprofile(walk.profile)
    try:
        return step()
    finally:
        sys.setprofile(None)


def documented(walk_name: str) -> tuple[set[str], dict[str, int]]:
    """The files and counts a walk's section of the architecture page names."""
    text = PAGE.read_text()
    section = text.split(f"### Walk: {walk_name}")[1].split("\n### ")[0].split("\n## ")[0]
    files = set(re.findall(r"^\| `([a-z_/]+\.py)`", section, flags=re.M))
    counts = {
        k.rstrip("s") + "s": int(v)
        for v, k in re.findall(r"\*\*(\d+) (files|checks?|conversions)\*\*", section)
    }
    return files, counts


class Decided(Exception):
    """Raised once the engine has decided: the walk ends there."""


def test_the_batching_setting_travels_as_the_page_says_also_under_the_fork_server(
    walk, mnist_store, smoke_split, tmp_path, monkeypatch
):
    from benchlib.commands import cli
    from benchlib.configuration.config import load_config
    from benchlib.fl import engine

    raw = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    raw["datasets"]["mnist5k"]["training"][KEY] = "off"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw))
    cell = Cell("smoke", "sfa", "fedavg", 1, 0)
    # Snakemake: the config loads (YAML -> typed), the rule's params (typed -> JSON)
    config = traced(walk, lambda: load_config(path))
    text = traced(walk, lambda: config.cell_spec(cell).to_json())
    assert walk.checks == ["configuration/config.py"] and (walk.typed, walk.json) == (1, 1)
    # the fork-server client reads the one key it needs and builds, checks and writes nothing
    assert traced(walk, lambda: spec_kernels(text)) == "portable"
    assert walk.checks == ["configuration/config.py"] and (walk.typed, walk.json) == (1, 1)
    # benchlib run (a fresh process or the forked child): the command, JSON -> typed, up to
    # the engine's decision
    decisions = []
    decide = engine.batched_clients

    def decided(*args, **kwargs):
        decisions.append(decide(*args, **kwargs))
        raise Decided

    monkeypatch.setattr(engine, "batched_clients", decided)
    monkeypatch.delenv("BENCHLIB_SHARED_CELLS", raising=False)
    args = argparse.Namespace(
        spec=text,
        store=str(mnist_store),
        split=str(smoke_split),
        out=str(tmp_path / "metrics.json"),
        timing=None,
        checkpoints=str(tmp_path / "checkpoints"),
        threads=None,
        stop_after=None,
    )
    with pytest.raises(Decided):
        traced(walk, lambda: cli.cmd_run(args))
    assert decisions == [None]  # "off": the clients train one after another
    # one check in each process that builds it
    assert walk.checks == ["configuration/config.py", "grid/spec.py"]
    files, counts = documented("training.client_batching")
    assert walk.files == files, sorted(walk.files)
    assert counts == {
        "files": len(walk.files) + 1,  # and the workflow's rule file, which Snakemake runs
        "checks": 1,  # per process
        "conversions": walk.typed + walk.json,
    }
    assert len(walk.files) + 1 <= 9 and walk.typed + walk.json == 3


def test_tau_is_validated_at_config_time_and_at_the_run_boundary_only(monkeypatch):
    from benchlib.methods.base import build_method

    seen: list[str] = []
    validate = jsonschema.Draft202012Validator.iter_errors

    def iter_errors(self, instance, *args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        text = json.dumps(instance, default=str)
        if caller.startswith(str(SRC)) and '"tau"' in json.dumps(self.schema) and '"tau"' in text:
            seen.append(Path(caller).name)
        return validate(self, instance, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", iter_errors)
    raw = yaml.safe_load((REPO / "config" / "smoke.yaml").read_text())
    config = Config(copy.deepcopy(raw))
    text = config.cell_spec(Cell("smoke", "sfa", "lightyear", 1, 0)).to_json()
    assert seen == ["params.py"]  # the method entry, resolved once when the config loads
    assert spec_kernels(text) == "portable"  # the fork-server client: no check
    spec = CellSpec.from_text(text)
    method = build_method(spec.method, spec.method_params)
    assert method.tau == spec.method_params["tau"] == 0.75
    assert seen == ["params.py", "spec.py"]
    _, counts = documented("LIGHTYEAR's tau")
    assert counts == {"checks": len(seen)}
