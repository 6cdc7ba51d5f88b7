"""The round loop: resume equivalence, determinism, malfunction evidence, topologies."""

from __future__ import annotations

import json
import logging

import torch
from helpers.specs import filled_spec

from benchlib.fl.engine import CellRun, run_cell


def run(spec, store, split, out_dir, **kwargs):
    out = out_dir / "metrics.json"
    run_cell(spec, store, split, out, out_dir / "ckpt", out_dir / "timing.json", **kwargs)
    return out


def test_resume_after_a_stop_is_byte_identical(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path, caplog
):
    spec = smoke_cell_spec("lightyear", "dynamic", 2)
    spec["training"]["rounds"] = 3
    whole = run(spec, mnist_store, smoke_split, tmp_path / "whole")
    part = tmp_path / "part"
    assert (
        run_cell(spec, mnist_store, smoke_split, part / "metrics.json", part / "ckpt", stop_after=2)
        is None
    )
    assert not (part / "metrics.json").exists()
    assert sorted(p.name for p in (part / "ckpt").iterdir()) == ["round_0001.pt"]
    with caplog.at_level(logging.INFO, logger="benchlib"):
        resumed = run(spec, mnist_store, smoke_split, part)
    assert "resuming from round 2" in caplog.text
    assert resumed.read_bytes() == whole.read_bytes()
    assert not (part / "ckpt").exists()  # checkpoints are removed once metrics.json exists
    assert json.loads((part / "timing.json").read_text())["resumed_from_round"] == 2


def test_same_spec_twice_gives_identical_metrics(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    spec = smoke_cell_spec("fedavg", "ana", 1)
    first = run(spec, mnist_store, smoke_split, tmp_path / "a")
    second = run(spec, mnist_store, smoke_split, tmp_path / "b")
    assert first.read_bytes() == second.read_bytes()
    other_seed = run(
        smoke_cell_spec("fedavg", "ana", 1, seed=1), mnist_store, smoke_split, tmp_path / "c"
    )
    assert other_seed.read_bytes() != first.read_bytes()


def test_checkpoint_from_another_config_is_not_resumed(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path, caplog
):
    spec = smoke_cell_spec("local", "sfa", 1)
    run_cell(spec, mnist_store, smoke_split, tmp_path / "m.json", tmp_path / "ckpt", stop_after=1)
    changed = dict(spec, training=dict(spec["training"], lr=0.01))
    with caplog.at_level(logging.INFO, logger="benchlib"):
        run_cell(changed, mnist_store, smoke_split, tmp_path / "m.json", tmp_path / "ckpt")
    assert "written under another cell config" in caplog.text
    assert "resuming" not in caplog.text


def test_metrics_record_malfunction_schedule_and_selections(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    metrics = json.loads(
        run(smoke_cell_spec("lightyear", "sfa", 2), mnist_store, smoke_split, tmp_path).read_text()
    )
    assert metrics["malicious_clients"] == [0, 1]
    assert [c["malicious"] for c in metrics["clients"]] == [True, True, False, False]
    assert metrics["history"]["schedule"] == [{"0": "sfa", "1": "sfa"}] * 2
    selections = metrics["history"]["selections"]
    assert len(selections) == 2 and all(len(per_round) == 4 for per_round in selections)
    for client, chosen in enumerate(selections[0]):
        assert client not in chosen
    scores = metrics["history"]["scores"][0]
    assert scores[0][0] is None and all(s is None or 0 <= s <= 1 for row in scores for s in row)


def test_star_clients_share_one_global_model_and_local_never_communicates(
    mnist_store, smoke_split, smoke_cell_spec
):
    star = CellRun(smoke_cell_spec("fedavg", "none", 0), mnist_store, smoke_split)
    star.run_round(0)
    vectors = [star.scoring.evaluation_vector(c) for c in range(star.num_clients)]
    assert all(torch.equal(v, vectors[0]) for v in vectors)
    local = CellRun(smoke_cell_spec("local", "none", 0), mnist_store, smoke_split)
    local.run_round(0)
    assert local.history.selections == [[[], [], [], []]]
    own = [local.scoring.evaluation_vector(c) for c in range(local.num_clients)]
    assert not torch.equal(own[0], own[1])


def test_a_global_model_that_is_a_row_of_the_received_stack_survives_the_next_round(
    mnist_store, smoke_split, smoke_cell_spec
):
    """The star round stacks received vectors into a buffer it reuses; a method that returns a
    row view of it (``received[0]``) must still see its own result as next round's global."""
    cell = CellRun(smoke_cell_spec("fedavg", "none", 0), mnist_store, smoke_split)
    returned, seen_global = [], []

    def first_row(global_vector, received, info):
        seen_global.append(global_vector.clone())
        returned.append(received[0].clone())
        return received[0]

    cell.method.aggregate = first_row
    for round_index in range(3):
        cell.run_round(round_index)
    assert torch.equal(seen_global[1], returned[0])
    assert torch.equal(seen_global[2], returned[1])
    assert not torch.equal(returned[0], returned[1])
    assert torch.equal(cell.global_vector, returned[2])


def test_sfa_broadcasts_do_not_touch_the_senders_own_model(
    mnist_store, smoke_split, smoke_cell_spec
):
    cell = CellRun(smoke_cell_spec("local", "sfa", 1), mnist_store, smoke_split)
    trained, _ = cell._train_all(0, cell.federation)
    sent = cell._transmit(0, cell.federation, trained)
    assert torch.equal(sent[0], -trained[0]) and torch.equal(sent[1], trained[1])
    assert torch.equal(cell.layout.flatten(cell.models[0]), trained[0])


def test_the_engine_gives_the_method_every_clients_training_rows(
    mnist_store, smoke_split, smoke_cell_spec, tmp_path
):
    """DRFA with ``lambda_start: sizes`` and no dual step (gamma 0): lambda after round 0 is
    the clients' shares of the split's training rows."""
    import csv

    spec = smoke_cell_spec("fedavg", "none", 0)
    spec.update(method="drfa", method_id="drfa")
    spec["method_params"] = {"gamma": 0.0, "lambda_start": "sizes"}
    spec["training"]["rounds"] = 1
    metrics = json.loads(run(filled_spec(spec), mnist_store, smoke_split, tmp_path).read_text())
    with smoke_split.open() as handle:
        rows = [r for r in csv.DictReader(handle) if r["subset"] == "train"]
    counts = [sum(r["client"] == str(c) for r in rows) for c in range(4)]
    expected = [round(n / sum(counts), 6) for n in counts]
    assert metrics["method_summary"]["lambda"] == [expected]
