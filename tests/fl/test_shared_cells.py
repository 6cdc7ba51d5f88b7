"""Cells shared across projects (BENCHLIB_SHARED_CELLS): a cell's identity, publishing a finished
cell once, and restoring its exact bytes with provenance that names where it came from. The
workflow end to end (two projects, one trains only its new method): tests/workflow/
test_deployment.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchlib.fl import shared_cells
from benchlib.grid.spec import CellSpec
from benchlib.primitives.errors import BenchlibError


@pytest.fixture
def inputs(tmp_path) -> tuple[Path, Path]:
    store = tmp_path / "store"
    store.mkdir()
    (store / "manifest.json").write_text('{"num_samples": 10}\n')
    split = tmp_path / "split.csv"
    split.write_text("client,subset\n0,train\n")
    return store, split


def identity(spec: dict, inputs, device: str = "cpu", threads: int = 1) -> dict:
    return shared_cells.cell_identity(CellSpec.from_json(spec), *inputs, device, threads)


def test_the_identity_changes_with_everything_the_numbers_depend_on(smoke_cell_spec, inputs):
    spec = smoke_cell_spec("fedavg", "sfa", 1)
    base = identity(spec, inputs)
    assert identity(spec, inputs) == base
    assert base["spec"] == CellSpec.from_json(spec).config_hash()
    assert {"benchlib", "commit", "dirty", "torch", "numpy", "python", "plugins"} <= set(base)
    other_lr = json.loads(json.dumps(spec))
    other_lr["training"]["lr"] *= 2
    store, split = inputs
    changed = [
        identity(smoke_cell_spec("fedavg", "sfa", 2), inputs),
        identity(other_lr, inputs),
        identity(spec, inputs, device="NVIDIA H200"),
        identity(spec, inputs, threads=2),
    ]
    split.write_text("client,subset\n0,val\n")
    changed.append(identity(spec, inputs))
    (store / "manifest.json").write_text('{"num_samples": 11}\n')
    changed.append(identity(spec, inputs))
    entries = {shared_cells.entry_of(Path("/s"), i) for i in [base, *changed]}
    assert len(entries) == 1 + len(changed)


def finished_cell(folder: Path, accuracy: float) -> tuple[Path, Path]:
    folder.mkdir(parents=True)
    out, timing = folder / "metrics.json", folder / "timing.json"
    out.write_text(json.dumps({"clients": [{"test_accuracy": accuracy}]}, indent=1))
    timing.write_text(json.dumps({"wall_seconds": 3.5, "trained_at": str(out)}))
    return out, timing


def test_a_published_cell_is_restored_byte_for_byte_and_names_its_origin(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    entry = shared_cells.entry_of(shared, {"cell": 1})
    first = tmp_path / "project_a" / "results" / "cell"
    out, timing = finished_cell(first, 0.9)
    restored = tmp_path / "project_b" / "results" / "cell"
    assert not shared_cells.restore(entry, restored / "metrics.json", restored / "timing.json")
    shared_cells.publish(entry, {"cell": 1}, out, timing)
    assert json.loads((entry / "identity.json").read_text()) == {"cell": 1}
    assert shared_cells.restore(entry, restored / "metrics.json", restored / "timing.json")
    assert (restored / "metrics.json").read_bytes() == out.read_bytes()
    record = json.loads((restored / "timing.json").read_text())
    assert record == {"wall_seconds": 3.5, "trained_at": str(out), "reused_from": str(entry)}

    other, other_timing = finished_cell(tmp_path / "project_c", 0.1)
    shared_cells.publish(entry, {"cell": 1}, other, other_timing)  # the first one stays
    assert (entry / "metrics.json").read_bytes() == out.read_bytes()
    assert sorted(p.name for p in shared.iterdir()) == [entry.name]  # no temporary left


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda e: (e / "timing.json").unlink(), "cannot be read (FileNotFoundError"),
        (lambda e: (e / "timing.json").write_text("[" * 100_000 + "]" * 100_000),
         "cannot be read (JSONDecodeError: nested too deeply"),
        (lambda e: (e / "timing.json").write_text("[1]"), "that is not a JSON object"),
        (lambda e: (e / "metrics.json").write_text('{"config_hash": "another"}'),
         "holds the metrics of another cell config"),
    ],
    ids=["no_timing", "deep_timing", "timing_a_list", "foreign_metrics"],
)  # fmt: skip
def test_a_damaged_or_foreign_shared_entry_is_never_this_cells_result(
    tmp_path, caplog, damage, words
):
    """A shared folder is written by others: an entry that cannot be read, or that holds
    another cell config's metrics, is passed over with one warning (the cell trains)."""
    entry = shared_cells.entry_of(tmp_path / "shared", {"cell": 1})
    (tmp_path / "shared").mkdir()
    out, timing = finished_cell(tmp_path / "project_a", 0.9)
    out.write_text(json.dumps({**json.loads(out.read_text()), "config_hash": "own"}))
    shared_cells.publish(entry, {"cell": 1}, out, timing)
    restored = tmp_path / "project_b"
    assert shared_cells.restore(entry, restored / "m.json", restored / "t.json", "own")
    shutil.rmtree(restored)
    damage(entry)
    assert not shared_cells.restore(entry, restored / "m.json", restored / "t.json", "own")
    assert not restored.exists()  # nothing written
    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert words in warning and warning.endswith("training the cell instead")


def test_the_setting(tmp_path, monkeypatch):
    monkeypatch.delenv(shared_cells.ENV, raising=False)
    assert shared_cells.shared_folder() is None
    monkeypatch.setenv(shared_cells.ENV, str(tmp_path))
    assert shared_cells.shared_folder() == tmp_path.resolve()
    monkeypatch.setenv(shared_cells.ENV, str(tmp_path / "missing"))
    with pytest.raises(BenchlibError) as info:
        shared_cells.shared_folder()
    assert str(info.value) == (
        f"BENCHLIB_SHARED_CELLS={tmp_path / 'missing'} is not a folder; create it "
        f"(mkdir -p {tmp_path / 'missing'}) or unset BENCHLIB_SHARED_CELLS"
    )


def test_a_cell_is_trained_once_then_copied_and_its_stale_checkpoints_cleared(
    smoke_cell_spec, inputs, tmp_path, monkeypatch
):
    monkeypatch.setenv("BENCHLIB_DEVICE", "cpu")
    shared = tmp_path / "shared"
    shared.mkdir()
    spec = CellSpec.from_json(smoke_cell_spec("fedavg", "sfa", 1))
    trained = []

    def outputs(project: str) -> tuple[Path, Path, Path]:
        run = tmp_path / project / "run"
        return run / "metrics.json", run / "timing.json", tmp_path / project / "checkpoints"

    def train(project: str):
        def fake() -> None:
            out, _ = finished_cell(outputs(project)[0].parent, 0.5)
            metrics = {**json.loads(out.read_text()), "config_hash": spec.config_hash()}
            out.write_text(json.dumps(metrics))  # as a cell's metrics.json records it
            trained.append(project)

        return fake

    shared_cells.train_or_reuse(shared, (spec, *inputs), outputs("a"), train("a"))
    checkpoints = outputs("b")[2]
    checkpoints.mkdir(parents=True)
    (checkpoints / "round_0001.pt").write_bytes(b"stale")
    shared_cells.train_or_reuse(shared, (spec, *inputs), outputs("b"), train("b"))
    assert trained == ["a"]
    assert outputs("b")[0].read_bytes() == outputs("a")[0].read_bytes()
    assert not checkpoints.exists()
    timing = json.loads(outputs("b")[1].read_text())
    assert Path(timing["reused_from"]).parent == shared
