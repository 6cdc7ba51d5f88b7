"""`benchlib status`: done/running/failed/pending cells per experiment and an ETA, read from a
working directory the test builds itself: real cells run in-process (one finished, one stopped
after a round, as a running job leaves it), and Snakemake's records written the way Snakemake 9
writes them (.snakemake/incomplete, .snakemake/metadata, .snakemake/locks)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from base64 import urlsafe_b64encode
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import OPS_EXPERIMENT, OPS_TABLE, ops_config, ops_write_config

from benchlib.commands.cli import main
from benchlib.commands.status import (
    STALE_MIN_SECONDS,
    _runs_snakemake,
    grid_status,
    snakemake_keys,
    snakemake_processes,
)
from benchlib.configuration.config import Cell, load_config
from benchlib.fl.engine import run_cell
from benchlib.fl.progress import progress_path, read_progress

ROUNDS = 3
DONE = Cell(OPS_EXPERIMENT, "none", "fedavg", 0, 0)
RUNNING = Cell(OPS_EXPERIMENT, "sfa", "lightyear", 1, 0)
FAILED = Cell(OPS_EXPERIMENT, "sfa", "fedavg", 1, 0)
PENDING = Cell(OPS_EXPERIMENT, "none", "lightyear", 0, 0)
OTHER = "ops2"  # a second experiment: only its cells' status when it is the target


def grid_config(rounds: int = ROUNDS) -> dict:
    config = ops_config(rounds)
    config["experiments"][OTHER] = dict(config["experiments"][OPS_EXPERIMENT], methods=["fedavg"])
    return config


def record(workdir: Path, kind: str, key: str, content: dict) -> None:
    """A Snakemake record of output ``key`` (urlsafe base64 file name, split as Snakemake does
    when longer than a file name may be)."""
    max_len = os.pathconf(workdir, "PC_NAME_MAX") or 255
    encoded = urlsafe_b64encode(key.encode()).decode()
    parts = [encoded[i : i + max_len - 1] for i in range(0, len(encoded), max_len - 1)]
    path = workdir.joinpath(".snakemake", kind, *("@" + p for p in parts[:-1]), parts[-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content))


def metrics_key(cell: Cell) -> str:
    return f"{cell.run_dir}/metrics.json"


@pytest.fixture(scope="module")
def grid_template(mnist_store, smoke_split, tmp_path_factory) -> Path:
    """A working directory in the middle of a run: DONE finished, RUNNING one round in (as
    Snakemake leaves a running job: incomplete marker, lock held), FAILED's job ended with
    an error (its log and metadata record, no metrics), PENDING never started."""
    workdir = tmp_path_factory.mktemp("status")
    configfile = ops_write_config(workdir / "grid.yaml", grid_config())
    config = load_config(configfile)
    for cell, stop_after in ((DONE, None), (RUNNING, 1)):
        out = workdir / metrics_key(cell)
        run_cell(
            config.cell_spec(cell),
            mnist_store,
            smoke_split,
            out,
            workdir / cell.checkpoint_dir,
            stop_after=stop_after,
        )
    record(workdir, "metadata", metrics_key(DONE), {"rule": "run_cell", "incomplete": False})
    record(workdir, "incomplete", metrics_key(RUNNING), {"external_jobid": None})
    record(workdir, "metadata", metrics_key(FAILED), {"rule": "run_cell", "incomplete": False})
    log = workdir / "logs/run_cell" / f"{FAILED.run_dir.removeprefix('results/runs/')}.log"
    log.parent.mkdir(parents=True)
    log.write_text("RuntimeError: out of memory\n")
    (workdir / ".snakemake" / "locks").mkdir(parents=True)
    (workdir / ".snakemake" / "locks" / "0.output.lock").write_text(metrics_key(RUNNING) + "\n")
    return workdir


SNAKEMAKES: dict[Path, subprocess.Popen] = {}  # the stand-in Snakemake of each grid


def stand_in_snakemake(workdir: Path) -> subprocess.Popen:
    """A process that looks like a Snakemake working in ``workdir`` (``snakemake`` in its
    command line, ``workdir`` its working directory) until its stdin closes."""
    process = subprocess.Popen(
        ["snakemake", "-c", "import sys; print('up', flush=True); sys.stdin.read()"],
        executable=sys.executable,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=workdir,
    )
    assert process.stdout.readline() == "up\n"  # running: its command line is readable now
    return process


def kill_snakemake(workdir: Path) -> None:
    """``kill -9`` of the grid's Snakemake: its lock and records stay."""
    process = SNAKEMAKES.pop(workdir)
    process.kill()
    process.wait()


@pytest.fixture
def grid(grid_template, tmp_path) -> Iterator[Path]:
    """The grid in the middle of its run, with its Snakemake running."""
    workdir = tmp_path / "work"
    shutil.copytree(grid_template, workdir)
    SNAKEMAKES[workdir] = stand_in_snakemake(workdir)
    yield workdir
    if workdir in SNAKEMAKES:
        process = SNAKEMAKES.pop(workdir)
        process.stdin.close()
        process.wait()


def seconds_of(workdir: Path, cell: Cell) -> list[float]:
    return [e["seconds"] for e in read_progress(progress_path(workdir / metrics_key(cell)))]


def test_status_counts_each_state_and_projects_the_work_left_from_round_times(grid):
    config = load_config(grid / "grid.yaml")
    status = grid_status(config, [OPS_TABLE], grid)
    assert list(status["experiments"]) == [OPS_EXPERIMENT]  # the table's cells only
    ops = status["experiments"][OPS_EXPERIMENT]
    assert {k: ops[k] for k in ("cells", "done", "running", "failed", "pending")} == {
        "cells": 4,
        "done": 1,
        "running": 1,
        "failed": 1,
        "pending": 1,
    }
    by_cell = {c["cell"]: c for c in status["cells"]}
    running = by_cell[RUNNING.run_dir.removeprefix("results/runs/")]
    assert (running["state"], running["rounds_done"], running["rounds"]) == ("running", 1, ROUNDS)
    own = seconds_of(grid, RUNNING)
    measured = seconds_of(grid, DONE) + own
    assert len(own) == 1 and len(measured) == ROUNDS + 1
    mean = sum(measured) / len(measured)
    expected = (ROUNDS - 1) * own[0] + 2 * ROUNDS * mean  # running + failed and pending cells
    assert ops["mean_round_seconds"] == pytest.approx(mean)
    assert ops["work_seconds"] == pytest.approx(expected)
    assert status["eta_seconds"] == pytest.approx(expected)  # one cell running
    assert status["unmeasured_cells"] == 0


def test_status_command_prints_the_table_and_names_running_and_failed_cells(grid, capsys):
    assert main(["status", "--config", str(grid / "grid.yaml"), "-d", str(grid)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:6] for line in out.splitlines()[1:3]}
    assert rows == {OPS_EXPERIMENT: ["4", "1", "1", "1", "1"], OTHER: ["2", "0", "0", "0", "2"]}
    assert "ETA at least " in out and "not counting 2 cell(s) with no measured round" in out
    assert f"running: {RUNNING.run_dir.removeprefix('results/runs/')} (round 1/3)" in out
    assert f"failed: {FAILED.run_dir.removeprefix('results/runs/')} (round 0/3; see logs/" in out
    assert main(["status", "--config", str(grid / "grid.yaml"), "-d", str(grid), "--json"]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert parsed["experiments"][OTHER]["pending"] == 2
    assert parsed["unmeasured_cells"] == 2


def test_a_started_job_without_a_running_snakemake_counts_as_failed(grid):
    shutil.rmtree(grid / ".snakemake" / "locks")  # the run was interrupted
    status = grid_status(load_config(grid / "grid.yaml"), [OPS_EXPERIMENT], grid)
    ops = status["experiments"][OPS_EXPERIMENT]
    assert (ops["running"], ops["failed"]) == (0, 2)
    assert not status["snakemake_running"]
    notes = [c["note"] for c in status["cells"] if c["state"] == "failed"]
    assert any("interrupted" in note for note in notes)


def test_metrics_of_another_cell_config_count_as_pending(grid):
    changed = ops_write_config(grid / "changed.yaml", grid_config(rounds=ROUNDS + 1))
    ops = grid_status(load_config(changed), [OPS_EXPERIMENT], grid)["experiments"][OPS_EXPERIMENT]
    assert (ops["done"], ops["pending"]) == (0, 2)


def test_a_grid_with_no_round_measured_has_no_eta(tmp_path, capsys):
    configfile = ops_write_config(tmp_path / "grid.yaml", grid_config())
    status = grid_status(load_config(configfile), [], tmp_path)
    assert status["experiments"][OPS_EXPERIMENT]["pending"] == 4
    assert status["eta_seconds"] is None
    assert main(["status", "--config", str(configfile), "-d", str(tmp_path)]) == 0
    assert "ETA unknown" in capsys.readouterr().out


def test_an_unknown_target_is_one_clear_error(tmp_path, capsys):
    configfile = ops_write_config(tmp_path / "grid.yaml", grid_config())
    argv = ["status", "--config", str(configfile), "-d", str(tmp_path), "tables/nope.tex"]
    assert main(argv) == 2
    assert "unknown target 'tables/nope.tex'" in capsys.readouterr().err


def test_snakemake_records_with_long_paths_are_read_back(tmp_path):
    key = "results/runs/" + "/".join(["a" * 90] * 4) + "/metrics.json"
    record(tmp_path, "incomplete", key, {"external_jobid": "42"})
    record(tmp_path, "incomplete", "short/metrics.json", {"external_jobid": None})
    assert snakemake_keys(tmp_path, "incomplete") == {key, "short/metrics.json"}
    assert snakemake_keys(tmp_path, "metadata") == set()


@pytest.mark.slow
@pytest.mark.workflow
def test_a_finished_snakemake_run_is_all_done(ops_reference_run, capsys):
    """Cells run by Snakemake (spec passed as JSON on the command line) match the config."""
    run = ops_reference_run
    status = grid_status(load_config(run.configfile), [OPS_TABLE], run.workdir)
    ops = status["experiments"][OPS_EXPERIMENT]
    assert (ops["cells"], ops["done"]) == (4, 4)
    assert ops["mean_round_seconds"] is not None  # every cell left its progress.jsonl
    assert all(c["rounds_done"] == c["rounds"] for c in status["cells"])
    argv = ["status", "--config", str(run.configfile), "-d", str(run.workdir), OPS_TABLE]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "all 4 cells are done"


def _rewrite_progress(workdir: Path, cell: Cell, **fields) -> None:
    path = progress_path(workdir / metrics_key(cell))
    lines = [{**line, **fields} for line in read_progress(path)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: its pid names no process now
    return child.pid


def test_a_running_cell_whose_process_is_gone_is_failed_and_the_lock_stale(grid, capsys):
    """After kill -9 of Snakemake's process group, its lock stays: the cell's progress lines
    name a process on this host that no longer exists."""
    _rewrite_progress(grid, RUNNING, pid=_dead_pid(), host=platform.node())
    kill_snakemake(grid)
    status = grid_status(load_config(grid / "grid.yaml"), [OPS_EXPERIMENT], grid)
    by_cell = {c["cell"]: c for c in status["cells"]}
    running = by_cell[RUNNING.run_dir.removeprefix("results/runs/")]
    assert running["state"] == "failed"
    assert "is gone (killed); the Snakemake lock here is stale" in running["note"]
    assert status["stale_lock"] and not status["snakemake_running"]
    assert main(["status", "--config", str(grid / "grid.yaml"), "-d", str(grid)]) == 0
    out = capsys.readouterr().out
    assert "Snakemake is running here" not in out
    assert "the Snakemake lock here is stale" in out and "snakemake --unlock" in out


def test_a_cell_on_another_host_is_stalled_after_many_round_times(grid):
    """No process to ask on another host: the age of its last round against its round time."""
    _rewrite_progress(grid, RUNNING, pid=1, host="another-host", time=1_000_000.0, seconds=2.0)
    config = load_config(grid / "grid.yaml")

    def state(now: float) -> dict:
        cells = grid_status(config, [OPS_EXPERIMENT], grid, now=now)["cells"]
        return {c["cell"]: c for c in cells}[RUNNING.run_dir.removeprefix("results/runs/")]

    assert state(1_000_000.0 + STALE_MIN_SECONDS - 1)["state"] == "running"
    stalled = state(1_000_000.0 + STALE_MIN_SECONDS + 1)
    assert stalled["state"] == "failed"
    assert stalled["note"].startswith("no round finished for 30m01s (a round takes 2s): stalled")


def test_status_reads_a_progress_file_with_damaged_bytes(grid):
    path = progress_path(grid / metrics_key(RUNNING))
    path.write_bytes(path.read_bytes() + b'{"round": 1, "seconds": 1.0, "note": "\xff\xfe"}\n')
    status = grid_status(load_config(grid / "grid.yaml"), [OPS_EXPERIMENT], grid)
    by_cell = {c["cell"]: c for c in status["cells"]}
    assert by_cell[RUNNING.run_dir.removeprefix("results/runs/")]["rounds_done"] == 2


def test_status_lists_diverged_cells(grid, capsys):
    path = grid / metrics_key(DONE)
    metrics = json.loads(path.read_text())
    metrics["history"]["nonfinite"] = [{"round": 0, "model": "global"}]
    path.write_text(json.dumps(metrics))
    _rewrite_progress(grid, RUNNING, nonfinite=[{"round": 0, "model": 2}])
    assert main(["status", "--config", str(grid / "grid.yaml"), "-d", str(grid)]) == 0
    out = capsys.readouterr().out
    cells = sorted(c.run_dir.removeprefix("results/runs/") for c in (DONE, RUNNING))
    assert f"2 diverged (non-finite models): {', '.join(cells)}; tables mark" in out


def test_status_survives_damaged_progress_files(grid, capsys):
    """A progress file that is a folder, or lines with absurd rounds and times, count as no
    measurement; status still prints its table."""
    path = progress_path(grid / metrics_key(RUNNING))
    path.write_text(
        '{"round": -5, "seconds": 1e308}\n{"round": 10000000000}\n'
        '{"round": 0, "seconds": 1e308, "time": 1e308, "pid": true, "host": 5}\n'
    )
    status = grid_status(load_config(grid / "grid.yaml"), [OPS_EXPERIMENT], grid)
    running = {c["cell"]: c for c in status["cells"]}[RUNNING.run_dir.removeprefix("results/runs/")]
    assert (running["state"], running["rounds_done"], running["round_seconds"]) == (
        "running",
        1,
        [],
    )
    path.unlink()
    path.mkdir()
    assert main(["status", "--config", str(grid / "grid.yaml"), "-d", str(grid)]) == 0
    assert "running: " in capsys.readouterr().out


def _line_of(status: dict, cell: Cell) -> dict:
    return {c["cell"]: c for c in status["cells"]}[cell.run_dir.removeprefix("results/runs/")]


def test_a_killed_snakemake_between_jobs_leaves_a_stale_lock_not_a_running_one(grid, capsys):
    """Killed when no job had started: no cell's process to ask, only the lock is left."""
    shutil.rmtree(grid / ".snakemake" / "incomplete")
    kill_snakemake(grid)
    status = grid_status(load_config(grid / "grid.yaml"), [OPS_EXPERIMENT], grid)
    assert status["stale_lock"] and not status["snakemake_running"]
    assert status["experiments"][OPS_EXPERIMENT]["running"] == 0
    assert main(["status", "--config", str(grid / "grid.yaml"), "-d", str(grid)]) == 0
    out = capsys.readouterr().out
    assert "Snakemake is not running here" in out and "Snakemake is running here" not in out
    assert "the Snakemake lock here is stale" in out


def test_a_cell_killed_before_its_first_round_is_not_running_for_ever(grid):
    """Killed while a job had started but not finished a round: no progress line names its
    process, and the lock's Snakemake is gone."""
    progress_path(grid / metrics_key(RUNNING)).unlink()
    config = load_config(grid / "grid.yaml")
    alive = _line_of(grid_status(config, [OPS_EXPERIMENT], grid), RUNNING)
    assert alive["state"] == "running"  # while its Snakemake runs, a cell may take its time
    kill_snakemake(grid)
    status = grid_status(config, [OPS_EXPERIMENT], grid)
    line = _line_of(status, RUNNING)
    assert line["state"] == "failed" and line["note"].startswith("interrupted: no Snakemake")
    assert status["stale_lock"] and not status["snakemake_running"]


def test_snakemake_processes_are_found_by_command_and_working_directory(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    here, there = stand_in_snakemake(tmp_path), stand_in_snakemake(elsewhere)
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, cwd=tmp_path
    )
    try:
        assert snakemake_processes(tmp_path) == [here.pid]
        assert snakemake_processes(elsewhere) == [there.pid]
    finally:
        for process in (here, there, other):
            process.stdin.close()
            process.wait()
    assert snakemake_processes(tmp_path) == []
    assert snakemake_processes(tmp_path, proc=tmp_path / "no-proc") is None


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["snakemake", "--cores", "2"], True),
        (["/venv/bin/python", "/venv/bin/snakemake", "-n"], True),
        (["python3", "-m", "snakemake", "--cores", "1"], True),
        (["benchlib", "forkserver", "--", "snakemake"], False),  # its child is the Snakemake
        (["benchlib", "run", "--spec", "{}"], False),
        (["vim", "Snakefile"], False),
    ],
)
def test_what_counts_as_a_snakemake_process(argv, expected):
    assert _runs_snakemake(argv) is expected


def test_a_working_directory_that_does_not_exist_is_one_error(tmp_path, capsys):
    configfile = ops_write_config(tmp_path / "grid.yaml", grid_config())
    argv = ["status", "--config", str(configfile), "-d", str(tmp_path / "typo")]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path / 'typo'} is not a folder; pass the workflow's working directory\n"
    )
