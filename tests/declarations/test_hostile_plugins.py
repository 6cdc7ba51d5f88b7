"""Hostile or careless plugins: whatever a plugin's module does while it imports (ends the
process, parses the command line, takes a built-in's name, declares a broken parameter schema),
benchlib stops with one line naming the plugin and a non-zero exit, never silently and never
with a traceback. The registry-wide tests run over every registry, so a component kind added
later is held to the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, ops_snakemake_argv, tool_env

from benchlib.declarations import plugins
from benchlib.declarations.params import Param, Params
from benchlib.declarations.registry import REGISTRIES, Registry


def fake_plugin(root: Path, module: str, source: str) -> Path:
    """An installed distribution ``<module>-pkg`` 1.2.3 whose entry point imports ``module``."""
    info = root / f"{module}_pkg-1.2.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}-pkg\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[benchlib.plugins]\n{module} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


def run(root: Path, argv: list[str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    env = tool_env()
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=cwd)


HOSTILE = {
    "exit_0": ("import sys\nsys.exit(0)\n", "it called sys.exit(0) while importing"),
    "exit_none": ("raise SystemExit\n", "it called sys.exit(None) while importing"),
    "base_exception": (
        "class Odd(BaseException):\n    pass\n\n\nraise Odd('odd')\n",
        "Odd: odd",
    ),
    "parses_argv": (
        """
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--plugin-option", required=True)
        parser.parse_args()
        """,
        "it called sys.exit(2) while importing",
    ),
    "built_in_dataset_source_name": (
        """
        from benchlib.data.registry import DatasetSource, register_dataset

        register_dataset(DatasetSource(name="mnist5k", build=print, num_classes=2,
                                       image_shape=(1, 28, 28)))
        """,
        "ValueError: dataset source 'mnist5k' registered twice",
    ),
    "invalid_param_schema": (
        """
        from benchlib.methods.catalog import declare_method
        from benchlib.declarations.params import Param

        declare_method("odd_schema", "x:y", "star", {"a": Param({"type": "wibble"}, 1, "a")})
        """,
        "method 'odd_schema' declares the parameter 'a' with an invalid JSON schema",
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_plugin_stops_the_config_check_with_one_line(tmp_path, case):
    source, phrase = HOSTILE[case]
    root = fake_plugin(tmp_path, "hostile_decl", source)
    done = run(
        root, [sys.executable, "-m", "benchlib.commands.cli", "check-config", "config/smoke.yaml"]
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(
        "error: plugin 'hostile_decl' (hostile_decl-pkg 1.2.3, module hostile_decl) failed to "
        "load: "
    ), lines
    assert phrase in lines[0]
    assert f"({root / 'hostile_decl.py'}:" in lines[0]  # the plugin's own line, not benchlib's
    assert lines[0].endswith("(pip uninstall hostile_decl-pkg)")


def test_a_plugin_that_parses_the_command_line_is_not_taken_for_benchlib(tmp_path):
    root = fake_plugin(tmp_path, "argv_decl", HOSTILE["parses_argv"][0])
    done = run(
        root, [sys.executable, "-m", "benchlib.commands.cli", "check-config", "config/smoke.yaml"]
    )
    assert "usage: benchlib" not in done.stderr and "benchlib: error" not in done.stderr
    assert "it printed 'argv_decl: error: the following arguments are required" in done.stderr


@pytest.mark.slow  # runs snakemake -n
def test_a_plugin_that_exits_at_import_stops_snakemake(tmp_path):
    root = fake_plugin(tmp_path / "site", "exit_decl", HOSTILE["exit_0"][0])
    argv = ops_snakemake_argv(tmp_path / "work", REPO / "config" / "smoke.yaml", "-n")
    done = run(root, argv)
    assert done.returncode != 0
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "plugin 'exit_decl'" in errors[0], done.stderr
    assert "sys.exit(0)" in errors[0] and "Traceback" not in done.stderr


def test_a_cell_does_not_run_beside_a_plugin_that_failed_part_way(tmp_path, smoke_cell_spec):
    """Its half-registered components could be used unseen: the cell stops, naming it."""
    source = "from benchlib.methods.catalog import declare_method\n\n" + (
        'declare_method("half", "x:y", "star")\nraise SystemExit(0)\n'
    )
    root = fake_plugin(tmp_path / "site", "half_decl", source)
    out = tmp_path / "out"
    argv = ["run", "--spec", json.dumps(smoke_cell_spec("fedavg", "sfa", 1)),
            "--store", str(tmp_path / "store"), "--split", str(tmp_path / "split.csv"),
            "--out", str(out / "metrics.json"), "--checkpoints", str(out / "ck")]  # fmt: skip
    done = run(root, [sys.executable, "-m", "benchlib.commands.cli", *argv])
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("error: plugin 'half_decl' (half_decl-pkg 1.2.3")
    assert not out.exists()


def test_ctrl_c_while_a_plugin_imports_goes_through(tmp_path, monkeypatch):
    (tmp_path / "interrupted_decl.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        plugins._import_plugin_module("interrupted_decl")


def test_a_plugin_that_loads_keeps_its_output_and_benchlibs_argv(tmp_path, monkeypatch, capsys):
    (tmp_path / "chatty_decl.py").write_text("import sys\nprint('hello from', sys.argv)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "argv", ["benchlib", "check-config", "x.yaml"])
    assert plugins._import_plugin_module("chatty_decl") == ""
    assert sys.argv == ["benchlib", "check-config", "x.yaml"]
    assert capsys.readouterr().err == "hello from ['chatty_decl']\n"


def _built_in_registries() -> list[Registry]:
    return [registry for registry in REGISTRIES if registry.names()]


@pytest.mark.parametrize("registry", _built_in_registries(), ids=lambda r: r.kind)
def test_no_registry_lets_a_plugin_take_a_built_in_name(registry):
    """Every registry, also one added later: the built-in keeps its name, the plugin fails."""
    name = registry.names()[0]
    entry = registry.get(name)
    plugin = plugins.Plugin("odd", "odd_decl", "odd-pkg", "1.0")
    with plugins._registering_as(plugin), pytest.raises(ValueError, match="registered twice"):
        registry.add(name, entry)
    assert registry.get(name) is entry


def test_a_plugins_registration_loads_the_built_ins_first():
    """A plugin imported before a registry's built-ins (another registry's lookup imports every
    plugin) still meets them: the clash is the plugin's error."""
    loaded: list[str] = []
    registry: Registry[str] = Registry("test thing", loader=lambda: loaded.append("built-ins"))
    try:
        with plugins._registering_as(plugins.Plugin("odd", "odd_decl", "odd-pkg", "1.0")):
            registry.add("plugin_thing", "x")
        assert loaded == ["built-ins"]
    finally:
        REGISTRIES.remove(registry)


def test_a_plugins_parameter_schemas_are_checked_when_it_registers():
    class Declared:
        params = Params({"ok": Param({"type": "integer"}, 1, "fine"),
                         "odd": Param({"minimum": "zero"}, 1, "broken")})  # fmt: skip

    registry: Registry[object] = Registry("test thing")
    try:
        registry.add("built_in", Declared())  # built-ins are checked by their own tests
        with (
            plugins._registering_as(plugins.Plugin("odd", "odd_decl", "odd-pkg", "1.0")),
            pytest.raises(ValueError, match="parameter 'odd' with an invalid JSON schema"),
        ):
            registry.add("from_plugin", Declared())
    finally:
        REGISTRIES.remove(registry)
