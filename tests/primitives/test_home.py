"""benchlib's own folder (benchlib.primitives.home): where its configs and paper values are found,
and the order in which a relative path is looked up (the user's folder first, then benchlib's)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.home import ENV, benchlib_dir, resolve_path, use_workflow_dir


def _home(folder: Path) -> Path:
    (folder / "config" / "paper").mkdir(parents=True)
    (folder / "config" / "paper_values").mkdir()
    (folder / "config" / "paper_values" / "x.csv").write_text("benchlib's\n")
    return folder


def test_the_running_snakefiles_folder_is_benchlibs_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "")  # unset, and restored after the test (use_workflow_dir sets it)
    assert benchlib_dir() == REPO  # this checkout (the package is imported from its src/)
    other = _home(tmp_path / "other")
    use_workflow_dir(other)
    assert benchlib_dir() == other.resolve()
    (other / "workflow").mkdir()
    monkeypatch.setenv(ENV, "")
    use_workflow_dir(other / "workflow")  # a workflow/Snakefile layout: the folder above
    assert benchlib_dir() == other.resolve()
    use_workflow_dir(tmp_path)  # no config/paper there (e.g. a remote Snakefile): unchanged
    assert benchlib_dir() == other.resolve()


def test_a_relative_path_is_the_users_first_then_benchlibs(tmp_path, monkeypatch):
    home = _home(tmp_path / "benchlib")
    monkeypatch.setenv(ENV, str(home))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    found = resolve_path("config/paper_values/x.csv", "paper values")
    assert found.read_text() == "benchlib's\n"
    (project / "config" / "paper_values").mkdir(parents=True)
    (project / "config" / "paper_values" / "x.csv").write_text("the user's\n")
    assert resolve_path("config/paper_values/x.csv", "paper values").read_text() == "the user's\n"


def test_a_missing_path_names_every_place_tried(tmp_path, monkeypatch):
    home = _home(tmp_path / "benchlib")
    monkeypatch.setenv(ENV, str(home))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BenchlibError) as error:
        resolve_path("config/paper_values/none.csv", "paper values")
    assert str(error.value) == (
        f"paper values: config/paper_values/none.csv not found (tried "
        f"{tmp_path / 'config/paper_values/none.csv'}, "
        f"{home.resolve() / 'config/paper_values/none.csv'}); give an existing path"
    )
