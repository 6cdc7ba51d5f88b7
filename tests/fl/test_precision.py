"""training.precision: the opt-in reduced-precision forwards (fl/precision.py)."""

from __future__ import annotations

import json

import pytest
import torch

from benchlib.fl.engine import CellRun, run_cell
from benchlib.fl.precision import compute_precision
from benchlib.primitives.errors import BenchlibError


def _cell(smoke_cell_spec, mnist_store, smoke_split, **training) -> CellRun:
    spec = smoke_cell_spec("fedavg", "none", 0)
    spec["training"].update(training)
    return CellRun(spec, mnist_store, smoke_split, device=torch.device("cpu"))


def _after_one_round(cell: CellRun) -> tuple[torch.Tensor, list]:
    cell.run_round(0)
    return cell.global_vector.clone(), cell.history.val[-1]


def test_unknown_precision_is_refused_with_the_choices(smoke_cell_spec, mnist_store, smoke_split):
    choices = r"precision: 'fp16' is not one of \['fp32', 'tf32', 'bf16'\]"
    with pytest.raises(BenchlibError, match=choices):
        _cell(smoke_cell_spec, mnist_store, smoke_split, precision="fp16")


def test_tf32_changes_nothing_on_cpu(smoke_cell_spec, mnist_store, smoke_split):
    fp32, fp32_val = _after_one_round(_cell(smoke_cell_spec, mnist_store, smoke_split))
    tf32, tf32_val = _after_one_round(
        _cell(smoke_cell_spec, mnist_store, smoke_split, precision="tf32")
    )
    assert torch.equal(fp32, tf32) and fp32_val == tf32_val


@pytest.mark.parametrize("batching", ["off", "on"])
def test_bf16_forwards_train_float32_models_close_to_the_float32_run(
    smoke_cell_spec, mnist_store, smoke_split, batching
):
    fp32, fp32_val = _after_one_round(
        _cell(smoke_cell_spec, mnist_store, smoke_split, client_batching=batching)
    )
    cell = _cell(
        smoke_cell_spec, mnist_store, smoke_split, client_batching=batching, precision="bf16"
    )
    assert (cell.batched is not None) == (batching == "on")
    bf16, bf16_val = _after_one_round(cell)
    assert bf16.dtype == torch.float32
    assert all(p.dtype == torch.float32 for m in cell.models for p in m.parameters())
    assert not torch.equal(fp32, bf16)  # the forwards did run in bfloat16
    # the same training up to bfloat16 rounding: the models stay close and score alike
    relative = float(torch.linalg.vector_norm(bf16 - fp32) / torch.linalg.vector_norm(fp32))
    assert relative < 0.05
    assert max(abs(a - b) for a, b in zip(fp32_val, bf16_val, strict=True)) < 0.1


def test_bf16_autocasts_only_inside_the_context():
    with compute_precision("bf16", torch.device("cpu")):
        assert torch.is_autocast_enabled("cpu")
        assert torch.get_autocast_dtype("cpu") == torch.bfloat16
        assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")
    assert (torch.ones(2, 3) @ torch.ones(3, 2)).dtype == torch.float32


def test_tf32_sets_the_cuda_matmul_flag_only_inside_the_context():
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        with compute_precision("tf32", torch.device("cuda")):
            assert torch.backends.cuda.matmul.allow_tf32
        assert not torch.backends.cuda.matmul.allow_tf32
        with compute_precision("tf32", torch.device("cpu")):
            assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def test_a_cell_records_its_precision(smoke_cell_spec, mnist_store, smoke_split, tmp_path):
    spec = smoke_cell_spec("fedavg", "none", 0)
    spec["training"].update(rounds=1, precision="bf16")
    out = tmp_path / "cell"
    metrics = run_cell(spec, mnist_store, smoke_split, out / "m.json", out / "ck", out / "t.json")
    assert metrics["config"]["training"]["precision"] == "bf16"
    assert json.loads((out / "t.json").read_text())["precision"] == "bf16"
