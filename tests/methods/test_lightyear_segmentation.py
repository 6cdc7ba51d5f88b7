"""LIGHTYEAR on segmentation (paper Eq. 16) and the segmentation Dice, by hand on tiny masks.

Validation set V_i: two 2x2 images, two classes. Image 0's mask is its top row, image 1's mask
is empty. Each model is given as per-pixel logits whose softmax confidence is the same at every
pixel, so the hand computation is short:

- reference i: perfect, confidence 0.75 -> Dice 1 (image 1: empty vs empty = 1), every pixel
  correct, ECE = |1 - 0.75| = 0.25;
- peer 1: image 0 finds one of the two mask pixels, image 1 one false positive, confidence 0.9
  -> Dice (2/3 + 0) / 2 = 1/3, 6 of 8 pixels correct, ECE = |0.75 - 0.9| = 0.15;
  A = (1 - |1 - 1/3| + 1 - |0.25 - 0.15| + 1 - |0.75 - 0.9|) / 3 = (1/3 + 0.9 + 0.85) / 3;
- peer 2: the inverse of the truth (what a sign flip does), confidence 0.75 -> Dice 0, no pixel
  correct, ECE 0.75; A = (0 + 0.5 + 1) / 3 = 0.5;
- peer 3: NaN outputs (a broken model) -> never selected.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers.builders import build_method

from benchlib.methods.base import PeerEvaluator, PeerView
from benchlib.methods.lightyear import agreement, model_stats
from benchlib.tasks.base import get_task

MASKS = torch.tensor([[[1, 1], [0, 0]], [[0, 0], [0, 0]]])
TASK = get_task("segmentation")


def logits(predicted: list[list[list[int]]], confidence: float) -> torch.Tensor:
    """``[N, 2, H, W]`` logits predicting ``predicted`` with this max-softmax at every pixel."""
    fg = torch.tensor(predicted, dtype=torch.float64)
    margin = math.log(confidence / (1 - confidence))  # softmax([0, m]) = (1 - c, c)
    class1 = torch.where(fg == 1, margin, -margin) / 2
    return torch.stack([-class1, class1], dim=1)


REFERENCE = logits([[[1, 1], [0, 0]], [[0, 0], [0, 0]]], 0.75)
PEER_CLOSE = logits([[[1, 0], [0, 0]], [[0, 1], [0, 0]]], 0.9)
PEER_FLIPPED = logits([[[0, 0], [1, 1]], [[1, 1], [1, 1]]], 0.75)
PEER_NAN = torch.full_like(REFERENCE, float("nan"))
A_CLOSE = (1 / 3 + 0.9 + 0.85) / 3
A_FLIPPED = 0.5


def test_dice_is_per_image_and_empty_vs_empty_counts_as_one():
    assert TASK.metrics(REFERENCE, MASKS)["dice"] == pytest.approx(1.0)
    # per image (2/3, 0) averaged; pooled over pixels it would be 2*1 / (2 + 2) = 0.5
    assert TASK.metrics(PEER_CLOSE, MASKS)["dice"] == pytest.approx(1 / 3)
    # empty mask + any predicted pixel = 0; empty mask + empty prediction = 1
    only_image_1 = TASK.metrics(PEER_CLOSE[1:], MASKS[1:])["dice"]
    assert only_image_1 == 0.0
    assert TASK.metrics(REFERENCE[1:], MASKS[1:])["dice"] == 1.0
    assert TASK.metrics(PEER_FLIPPED, MASKS)["dice"] == 0.0


def test_pixel_level_terms_by_hand():
    view = TASK.peer_view(PEER_CLOSE, MASKS)
    assert view.logits.shape == (8, 2) and view.quality == pytest.approx(1 / 3)
    stats = model_stats(view.logits, view.labels, "paper", view.quality)
    assert stats.accuracy == pytest.approx(1 / 3)  # Dice, not the pixel accuracy 0.75
    assert stats.ece == pytest.approx(0.15)  # 15 bins over all 8 validation pixels
    torch.testing.assert_close(stats.confidence, torch.full((8,), 0.9, dtype=torch.float64))
    reference = TASK.peer_view(REFERENCE, MASKS)
    ref_stats = model_stats(reference.logits, reference.labels, "paper", reference.quality)
    assert ref_stats.ece == pytest.approx(0.25)
    assert agreement(ref_stats, stats, "paper") == pytest.approx(A_CLOSE)
    # with Eq. 13's pixel accuracy instead of Eq. 16's Dice the score would differ
    pixel_stats = model_stats(view.logits, view.labels, "paper")
    assert agreement(ref_stats, pixel_stats, "paper") == pytest.approx((0.75 + 0.9 + 0.85) / 3)


def run(params: dict, round_index: int = 1):
    table = {0.0: REFERENCE, 1.0: PEER_CLOSE, 2.0: PEER_FLIPPED, 3.0: PEER_NAN}

    def outputs(vector: torch.Tensor) -> torch.Tensor:
        return table[float(vector[0])]

    evaluator = PeerEvaluator(
        predict=outputs, labels=MASKS, view=lambda v: TASK.peer_view(outputs(v), MASKS)
    )
    own = torch.tensor([0.0, 1.0])
    received = torch.tensor([[1.0, 3.0], [2.0, -1.0], [3.0, 5.0]])
    method = build_method("lightyear", params)
    view = PeerView(round_index, 0, own, [1, 2, 3], received, evaluator)
    return own, received, method.aggregate_client(view)


def test_selection_with_the_segmentation_threshold():
    own, received, result = run({"tau": 0.6, "gamma": 0.95}, round_index=2)
    assert result.scores[1] == pytest.approx(A_CLOSE)
    assert result.scores[2] == pytest.approx(A_FLIPPED)
    assert math.isnan(result.scores[3])
    assert result.selected == [1]  # 0.694 >= 0.6 > 0.5; NaN never
    torch.testing.assert_close(result.vector, own + 0.95**2 * (received[0] - own))


def test_classification_threshold_would_reject_the_close_peer():
    # the paper's tau is 0.6 for segmentation because 0.75 rejects peers like this one
    own, _, result = run({"tau": 0.75})
    assert result.scores[1] == pytest.approx(A_CLOSE) and A_CLOSE < 0.75
    assert result.selected == [] and torch.equal(result.vector, own)


@pytest.mark.workflow
@pytest.mark.slow
def test_paper_segmentation_tables_plan_40_cells_each_offline(tmp_path):
    """Tables 14 and 18 from the default config: 10 methods x k = 1..4, one seed, each."""
    import re
    import subprocess

    from conftest import REPO, tool_env

    command = ["snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path), "-n",
               "--profile", str(REPO / "profiles" / "slurm")]  # fmt: skip
    result = subprocess.run(
        [*command, "tables/ultrasound_ana.tex", "tables/xray_ana.tex"],
        capture_output=True, text=True, env=tool_env(), timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout, flags=re.M))
    assert stats["run_cell"] == "80" and stats["render_table"] == "2"
    cells = re.findall(r"results/runs/(\w+)/ana/\w+/k\d/seed0/metrics\.json", result.stdout)
    assert sorted(set(cells)) == ["ultrasound", "xray"]
    assert len(set(re.findall(r"results/runs/ultrasound/ana/\w+/k\d", result.stdout))) == 40
    assert not (tmp_path / "results").exists()
