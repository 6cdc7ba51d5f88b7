"""Resume for real: a SIGKILLed cell and a SIGKILLed Snakemake run pick up where they stopped
and give exactly the bytes of an uninterrupted run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from base64 import urlsafe_b64decode, urlsafe_b64encode
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from conftest import (
    OPS_EXPERIMENT,
    OPS_TABLE,
    benchlib_exe,
    ops_benchlib,
    ops_cell_dirs,
    ops_run_args,
    ops_snakemake,
    ops_snakemake_argv,
    tool_env,
)

pytestmark = pytest.mark.slow  # spawns `benchlib run` and snakemake

CHECKPOINT = re.compile(r"^round_(\d{4,})\.pt$")
RESUMED = re.compile(r"resuming from round (\d+)")
ROUNDS = 8


def completed_rounds(ckpt_dir: Path) -> list[int]:
    if not ckpt_dir.is_dir():
        return []
    return sorted(int(m.group(1)) for p in ckpt_dir.iterdir() if (m := CHECKPOINT.match(p.name)))


def wait_until(condition, timeout: float, what: str, proc: subprocess.Popen | None = None):
    """Poll ``condition`` every 20 ms; fail if ``proc`` ends first or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (rc {proc.returncode}) before {what}")
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigkilled_cell_resumes_to_identical_metrics(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    spec = smoke_cell_spec("lightyear", "ana", k=1)
    spec["training"]["rounds"] = ROUNDS
    reference = tmp_path / "reference"
    result = ops_benchlib(*ops_run_args(spec, mnist_store, smoke_split, reference))
    assert result.returncode == 0, result.stderr

    killed = tmp_path / "killed"
    ckpt_dir = killed / "checkpoints"
    with open(tmp_path / "first.log", "w") as log:
        proc = subprocess.Popen(
            [benchlib_exe(), *ops_run_args(spec, mnist_store, smoke_split, killed)],
            env=tool_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            rounds = wait_until(lambda: completed_rounds(ckpt_dir), 300, "a checkpoint", proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert max(rounds) < ROUNDS - 1, "killed too late: every round had finished"
    assert not (killed / "metrics.json").exists()
    assert not (killed / "timing.json").exists()
    saved = completed_rounds(ckpt_dir)[-1]

    resumed = ops_benchlib(*ops_run_args(spec, mnist_store, smoke_split, killed))
    assert resumed.returncode == 0, resumed.stderr
    match = RESUMED.search(resumed.stderr)
    assert match, resumed.stderr
    assert int(match.group(1)) == saved + 1 > 0
    assert "round 1/" not in resumed.stderr  # the finished rounds were not trained again
    assert (killed / "metrics.json").read_bytes() == (reference / "metrics.json").read_bytes()
    timing = json.loads((killed / "timing.json").read_text())
    assert timing["resumed_from_round"] == saved + 1
    assert not ckpt_dir.exists()  # a finished cell clears its checkpoints


def test_checkpoint_of_another_config_is_not_resumed(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    spec = smoke_cell_spec("fedavg", "sfa", k=1)
    spec["training"]["rounds"] = 3
    args = ops_run_args(spec, mnist_store, smoke_split, tmp_path)
    first = ops_benchlib(*args, "--stop-after", "1")
    assert first.returncode == 0, first.stderr
    assert completed_rounds(tmp_path / "checkpoints") == [0]
    assert not (tmp_path / "metrics.json").exists()

    changed = json.loads(json.dumps(spec))
    changed["training"]["lr"] = spec["training"]["lr"] / 2
    result = ops_benchlib(*ops_run_args(changed, mnist_store, smoke_split, tmp_path))
    assert result.returncode == 0, result.stderr
    assert "was written under another cell config; ignoring it and starting fresh" in result.stderr
    assert "WARNING" in result.stderr
    assert not RESUMED.search(result.stderr)
    assert json.loads((tmp_path / "timing.json").read_text())["resumed_from_round"] == 0
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["config"]["training"]["lr"] == changed["training"]["lr"]
    assert len(metrics["history"]["val_accuracy"]) == 3


def identity(path: Path) -> tuple[int, int]:
    """Inode and mtime: a file rewritten by a re-run differs in at least one of them."""
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def cell_log(workdir: Path, cell: str) -> Path:
    return workdir / f"logs/run_cell/{OPS_EXPERIMENT}/{cell}.log"


# Snakemake's own records of a job (its default file backend, snakemake/persistence/file.py in
# 9.27.1). When a job starts, Snakemake writes a marker .snakemake/incomplete/<key> for each
# output; when it has finished (after the job wrote every output and Snakemake checked them), it
# writes .snakemake/metadata/<key> for each output and only then deletes the markers. <key> is the
# output path as the rule names it (relative to the workdir), urlsafe-base64 encoded and cut into
# directories of at most NAME_MAX - 1 characters, all but the last prefixed with "@".
# Before the next run Snakemake refuses (IncompleteFilesException, even before it checks the
# lock) if any existing output still has a marker.
RUN_CELL_OUTPUTS = ("metrics.json", "timing.json")


def snakemake_record(workdir: Path, kind: str, key: str) -> Path:
    """Where Snakemake keeps the ``kind`` ("metadata" or "incomplete") record of output ``key``."""
    max_len = os.pathconf(workdir, "PC_NAME_MAX") or 255
    encoded = urlsafe_b64encode(key.encode()).decode()
    parts = [encoded[i : i + max_len - 1] for i in range(0, len(encoded), max_len - 1)]
    return workdir.joinpath(".snakemake", kind, *("@" + p for p in parts[:-1]), parts[-1])


def recorded_finished(workdir: Path, cell_dir: Path) -> bool:
    """Whether Snakemake has recorded the run_cell job writing ``cell_dir`` as finished.

    Metadata first, then the marker: the records only ever go (none) -> marker -> marker and
    metadata -> metadata, so this order is right even while Snakemake is writing them."""
    keys = [str((cell_dir / name).relative_to(workdir)) for name in RUN_CELL_OUTPUTS]
    return all(snakemake_record(workdir, "metadata", k).is_file() for k in keys) and not any(
        snakemake_record(workdir, "incomplete", k).exists() for k in keys
    )


def incomplete_outputs(workdir: Path) -> list[str]:
    """Outputs that exist while Snakemake still marks them incomplete (what it would refuse)."""
    root = workdir / ".snakemake" / "incomplete"
    if not root.is_dir():
        return []
    found = []
    for marker in root.rglob("*"):
        if marker.is_file() and marker.name != "migration_underway":
            parts = marker.relative_to(root).parts
            key = urlsafe_b64decode("".join(p.removeprefix("@") for p in parts)).decode()
            if (workdir / key).exists():
                found.append(key)
    return sorted(found)


def group_states(pgid: int) -> dict[int, str]:
    """Thread id -> state letter (man proc(5)) of every thread in process group ``pgid``."""
    states = {}
    for stat in Path("/proc").glob("[0-9]*/task/[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:  # it ended while we looked
            continue
        if int(fields[2]) == pgid:
            states[int(stat.parent.name)] = fields[0]
    return states


def freeze(pgid: int) -> None:
    """SIGSTOP the group and wait until no thread of it can touch a file any more."""
    os.killpg(pgid, signal.SIGSTOP)
    wait_until(
        lambda: all(s in "TtZX" for s in group_states(pgid).values()), 60, "the group to stop"
    )


def kill(pgid: int) -> None:
    """SIGKILL the group and wait until every process of it is dead (gone or a zombie)."""
    os.killpg(pgid, signal.SIGKILL)
    wait_until(lambda: all(s in "ZX" for s in group_states(pgid).values()), 60, "the group to die")


@dataclass(frozen=True)
class Snapshot:
    """What Snakemake and the cells have left on disk."""

    finished: tuple[str, ...]  # run_cell jobs Snakemake has recorded as finished
    checkpoints: dict[str, int]  # unfinished cell -> its last completed round, if it has one
    incomplete: tuple[str, ...]  # outputs that exist but are still marked incomplete

    @classmethod
    def take(cls, workdir: Path, cells: dict[str, Path], ckpt_dirs: dict[str, Path]) -> Snapshot:
        finished = tuple(n for n, d in cells.items() if recorded_finished(workdir, d))
        checkpoints = {
            n: max(rounds)
            for n in cells
            if n not in finished and (rounds := completed_rounds(ckpt_dirs[n]))
        }
        return cls(finished, checkpoints, tuple(incomplete_outputs(workdir)))


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_sigkilled_snakemake_resumes_with_unlock_and_rerun_incomplete(ops_reference_run, tmp_path):
    """Kill Snakemake's process group while one cell is done and another is mid-run.

    No race: the group is frozen (SIGSTOP) before its state is judged, and killed only if that
    frozen state is the one wanted: a cell Snakemake has recorded as finished, a cell with rounds
    left after its last checkpoint, and no job caught between writing its outputs and Snakemake
    recording it (Snakemake would then report incomplete files, not the lock). Otherwise it runs
    on (SIGCONT) and we look again."""
    configfile = ops_reference_run.configfile
    rounds = yaml.safe_load(configfile.read_text())["datasets"]["mnist5k"]["training"]["rounds"]
    cells = ops_cell_dirs(tmp_path)
    ckpt_dirs = {n: tmp_path / f"results/checkpoints/{OPS_EXPERIMENT}/{n}" for n in cells}
    reference = ops_reference_run.workdir
    # The records are read where Snakemake keeps them: every cell of the reference run is there.
    for path in ops_cell_dirs(reference).values():
        assert recorded_finished(reference, path), f"no Snakemake record of {path} found"

    def wanted(snap: Snapshot) -> bool:
        return (
            bool(snap.finished)
            and any(r < rounds - 2 for r in snap.checkpoints.values())
            and not snap.incomplete
        )

    def worth_freezing() -> bool:
        try:  # unfrozen, files come and go under us: a cheap first look only
            return wanted(Snapshot.take(tmp_path, cells, ckpt_dirs))
        except OSError:
            return False

    argv = ops_snakemake_argv(tmp_path, configfile, "--cores", "2", "--", OPS_TABLE)
    with open(tmp_path / "driver.log", "w") as log:
        proc = subprocess.Popen(
            argv,
            env=tool_env(),
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the running jobs die with it
        )
        deadline, freezes = time.monotonic() + 600, 0
        try:
            while True:
                left = deadline - time.monotonic()
                wait_until(worth_freezing, left, "a finished and a running cell", proc)
                freeze(proc.pid)
                freezes += 1
                frozen = Snapshot.take(tmp_path, cells, ckpt_dirs)
                if wanted(frozen):
                    break
                os.killpg(proc.pid, signal.SIGCONT)
        finally:
            kill(proc.pid)
            proc.wait(timeout=30)
    print(f"killed on freeze {freezes}: {frozen}")
    # Stopped processes die without running another instruction: the disk is as judged.
    assert Snapshot.take(tmp_path, cells, ckpt_dirs) == frozen
    done = frozen.finished
    unfinished = [n for n in cells if n not in done]
    finished = {
        n: (identity(cells[n] / "metrics.json"), identity(cell_log(tmp_path, n))) for n in done
    }
    for name in unfinished:
        for output in RUN_CELL_OUTPUTS:
            assert not (cells[name] / output).exists()

    locked = ops_snakemake(tmp_path, configfile, "--cores", "2", "--", OPS_TABLE)
    assert locked.returncode != 0
    assert "cannot be locked" in locked.stdout + locked.stderr, locked.stderr[-3000:]
    unlock = ops_snakemake(tmp_path, configfile, "--unlock")
    assert unlock.returncode == 0, unlock.stderr
    rerun = ops_snakemake(
        tmp_path, configfile, "--cores", "2", "--rerun-incomplete", "--", OPS_TABLE
    )
    assert rerun.returncode == 0, rerun.stderr[-4000:]

    stats = re.search(r"^run_cell\s+(\d+)$", rerun.stdout + rerun.stderr, re.MULTILINE)
    assert stats, rerun.stderr[-3000:]
    assert int(stats.group(1)) == len(unfinished)
    for name in done:
        now = (identity(cells[name] / "metrics.json"), identity(cell_log(tmp_path, name)))
        assert now == finished[name], f"finished cell {name} was run again"
    for name in unfinished:
        match = RESUMED.search(cell_log(tmp_path, name).read_text())
        if name in frozen.checkpoints:
            assert match, f"cell {name} did not resume"
            assert int(match.group(1)) == frozen.checkpoints[name] + 1
        else:  # killed before its first checkpoint (or never started): a fresh start
            assert match is None, f"cell {name} resumed from a checkpoint it did not have"
    assert (tmp_path / OPS_TABLE).read_bytes() == (reference / OPS_TABLE).read_bytes()
    for name, path in ops_cell_dirs(reference).items():
        assert (cells[name] / "metrics.json").read_bytes() == (path / "metrics.json").read_bytes()
