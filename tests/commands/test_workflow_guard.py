"""The Snakefile's guard: every config file the workflow loaded is read strictly (as a module of
another workflow too), a config no file holds is refused, and a second Snakemake in a folder
that another one is running in says so instead of leaving Snakemake's advice to
``--cleanup-metadata`` unexplained."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, ops_snakemake_argv, tool_env

from benchlib.commands.workflow_guard import _ancestors, check_config_files, concurrent_note
from benchlib.primitives.errors import BenchlibError

SMOKE = REPO / "config" / "smoke.yaml"


def test_every_config_file_is_read_strictly(tmp_path):
    text = SMOKE.read_text().replace("lr: 0.", "lr: 5.0\n      lr: 0.", 1)
    (tmp_path / "dup.yaml").write_text(text)
    with pytest.raises(BenchlibError, match="the key 'lr' appears twice"):
        check_config_files([SMOKE, tmp_path / "dup.yaml"], {"experiments": {}})
    check_config_files([SMOKE], {"experiments": {}})


def test_a_config_that_no_file_holds_is_refused_unless_it_is_the_paper_grids():
    with pytest.raises(BenchlibError, match="a config that no config file holds"):
        check_config_files([], {"experiments": {"e": {}}})
    check_config_files([], {})  # no experiments: the paper grids, read strictly by benchlib


def stand_in_snakemake(workdir: Path) -> subprocess.Popen:
    """A process that looks like a Snakemake working in ``workdir`` until its stdin closes."""
    argv = ["snakemake", "-c", "import sys; print('up', flush=True); sys.stdin.read()"]
    process = subprocess.Popen(argv, executable=sys.executable, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, cwd=workdir)  # fmt: skip
    assert process.stdout.readline() == "up\n"  # running: its command line is readable now
    return process


def take_lock(workdir: Path) -> None:
    (workdir / ".snakemake" / "locks").mkdir(parents=True)
    (workdir / ".snakemake" / "locks" / "0.output.lock").write_text("results/x\n")


def test_a_running_snakemake_with_the_lock_is_noted(tmp_path):
    assert concurrent_note(tmp_path) is None  # no lock
    take_lock(tmp_path)
    assert concurrent_note(tmp_path) is None  # a lock, but its Snakemake is gone
    first = stand_in_snakemake(tmp_path)
    try:
        note = concurrent_note(tmp_path)
    finally:
        first.stdin.close()
        first.wait()
    assert note is not None and note.startswith(f"note: another Snakemake (pid {first.pid})")
    assert "rather than run `--cleanup-metadata`, `--rerun-incomplete` or `--unlock`" in note


def test_a_snakemake_never_counts_itself_or_its_parents():
    assert {os.getpid(), os.getppid()} <= _ancestors(os.getpid(), Path("/proc"))


@pytest.mark.slow  # runs snakemake -n
@pytest.mark.workflow
def test_a_second_snakemake_in_a_running_folder_says_what_is_happening(tmp_path):
    take_lock(tmp_path)
    first = stand_in_snakemake(tmp_path)
    try:
        argv = ops_snakemake_argv(tmp_path, SMOKE, "-n")
        done = subprocess.run(argv, env=tool_env(), capture_output=True, text=True, timeout=600)
    finally:
        first.stdin.close()
        first.wait()
    notes = [line for line in done.stderr.splitlines() if line.startswith("note: another")]
    assert len(notes) == 1 and f"(pid {first.pid})" in notes[0], done.stderr
