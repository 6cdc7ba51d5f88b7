"""How `make test` spreads the suite over its workers (tests/conftest.py): the modules that read
one shared workflow run are one work unit, so the run is built once; every other module is a unit
of its own."""

from __future__ import annotations

import ast
from types import SimpleNamespace

from conftest import REPO, SHARED_RUN_MODULES, pytest_xdist_make_scheduler

SHARED_RUNS = ("smoke_run", "ops_reference_run")


def fixture_users(name: str) -> set[str]:
    """Test modules with a test or fixture that takes ``name`` as an argument."""
    users = set()
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and name in {a.arg for a in node.args.args}:
                users.add(path.relative_to(REPO).as_posix())
    return users


def test_every_module_reading_a_shared_run_is_in_its_unit():
    for name in SHARED_RUNS:
        listed = {module for module, run in SHARED_RUN_MODULES.items() if run == name}
        assert listed == fixture_users(name), (
            f"update SHARED_RUN_MODULES in tests/conftest.py for {name}"
        )
    assert set(SHARED_RUN_MODULES.values()) == set(SHARED_RUNS)


def test_the_scheduler_puts_a_shared_run_s_modules_in_one_unit():
    options = {"dist": "loadfile", "tx": ["2*popen"]}
    scheduler = pytest_xdist_make_scheduler(SimpleNamespace(getvalue=options.get), log=None)
    scope = scheduler._split_scope
    assert scope("tests/workflow/test_workflow_smoke.py::test_a") == "smoke_run"
    assert scope("tests/report/test_report_browser.py::test_b[x::y]") == "smoke_run"
    assert scope("tests/commands/test_status.py::test_c") == "ops_reference_run"
    assert scope("tests/grid/test_axes.py::test_d") == "tests/grid/test_axes.py"
    other = {"dist": "load", "tx": ["2*popen"]}
    assert pytest_xdist_make_scheduler(SimpleNamespace(getvalue=other.get), log=None) is None
