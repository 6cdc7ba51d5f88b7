"""JSON nested 100,000 deep (which Python's parser cannot follow) is malformed JSON like any
other: one error line from ``benchlib run``, ``collect`` and ``verify``, and ``benchlib status``
counts what it cannot read as nothing (never a RecursionError); a spec holding NaN or Infinity
(which Python's parser reads) is one error line too."""

from __future__ import annotations

import json

import pytest
from conftest import ops_config, ops_write_config

from benchlib.commands.cli import main
from benchlib.commands.status import grid_status
from benchlib.configuration.config import load_config
from benchlib.primitives.io import loads_json

DEEP = "[" * 100_000 + "]" * 100_000


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("error: "), err
    return err


def test_loads_json_turns_deep_nesting_into_a_decode_error():
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        loads_json(DEEP)
    with pytest.raises(json.JSONDecodeError, match="nested too deeply"):
        loads_json(DEEP.encode())
    assert loads_json("[[1]]") == [[1]]


@pytest.mark.parametrize("as_file", [False, True])
def test_run_with_a_deep_spec_is_one_error_line(tmp_path, capsys, as_file):
    spec = DEEP
    if as_file:
        (tmp_path / "spec.json").write_text(DEEP)
        spec = f"@{tmp_path / 'spec.json'}"
    argv = ["run", "--spec", spec, "--store", str(tmp_path), "--split", str(tmp_path / "s.csv"),
            "--out", str(tmp_path / "out" / "metrics.json"),
            "--checkpoints", str(tmp_path / "out" / "ck")]  # fmt: skip
    assert main(argv) == 2
    assert "--spec is not valid JSON (nested too deeply)" in one_error_line(capsys)
    assert not (tmp_path / "out").exists()


def test_collect_with_a_deep_metrics_file_is_one_error_line(tmp_path, capsys):
    (tmp_path / "metrics.json").write_text(DEEP)
    out = tmp_path / "collected.csv"
    assert main(["collect", "--out", str(out), str(tmp_path / "metrics.json")]) == 2
    assert "metrics.json is not valid JSON; delete it and rerun its cell" in one_error_line(capsys)
    assert not out.exists()


def test_status_reads_deep_metrics_and_progress_as_nothing(tmp_path, capsys):
    configfile = ops_write_config(tmp_path / "grid.yaml", ops_config(2))
    config = load_config(configfile)
    cells = config.cells(next(iter(config.experiments)))
    metrics = tmp_path / cells[0].metrics_path
    metrics.parent.mkdir(parents=True)
    metrics.write_text(DEEP)
    (metrics.parent / "progress.jsonl").write_text(DEEP + "\n" + '{"round": 0, "seconds": 1.5}\n')
    status = grid_status(config, [], tmp_path)
    line = next(c for c in status["cells"] if c["cell"] == cells[0].id)
    assert line["state"] == "pending" and line["round_seconds"] == [1.5]
    assert main(["status", "--config", str(configfile), "-d", str(tmp_path)]) == 0
    assert capsys.readouterr().err == ""


def test_verify_with_a_deep_digest_is_one_error_line(tmp_path, capsys):
    (tmp_path / "digest.json").write_text(DEEP)
    assert main(["verify", "--digest", str(tmp_path / "digest.json"), str(tmp_path)]) == 2
    assert "is not valid JSON (nested too deeply)" in one_error_line(capsys)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_a_spec_holding_nan_or_infinity_is_one_error_line(tmp_path, capsys, constant):
    argv = ["run", "--spec", f'{{"seed": 0, "training": {{"lr": {constant}}}}}',
            "--store", str(tmp_path), "--split", str(tmp_path / "s.csv"),
            "--out", str(tmp_path / "out" / "metrics.json"),
            "--checkpoints", str(tmp_path / "out" / "ck")]  # fmt: skip
    assert main(argv) == 2
    assert f"--spec holds {constant}, not a finite number" in one_error_line(capsys)
