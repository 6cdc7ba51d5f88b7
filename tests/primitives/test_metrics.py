"""ECE, accuracy and the LIGHTYEAR agreement score / update against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers.builders import build_method

from benchlib.methods.base import PeerEvaluator, PeerView
from benchlib.primitives.metrics import accuracy, expected_calibration_error

LABELS = torch.tensor([0, 1, 2, 1])
REF_LOGITS = torch.tensor([[2.0, 0.5, 0.1], [0.3, 1.5, 0.2], [1.0, 0.2, 0.4], [0.1, 0.2, 3.0]])
PEER_LOGITS = torch.tensor([[1.0, 0.9, 0.1], [0.2, 2.5, 0.2], [0.1, 0.2, 0.4], [0.1, 2.2, 0.3]])


def numpy_ece(conf: np.ndarray, correct: np.ndarray, bins: int = 15) -> float:
    """Plain-loop ECE with (lower, upper] bins; conf == 0 goes to the first bin."""
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [
            (c, k)
            for c, k in zip(conf, correct, strict=True)
            if lo < c <= hi or (b == 0 and c == 0)
        ]
        if members:
            cs, ks = zip(*members, strict=True)
            total += len(members) / len(conf) * abs(np.mean(ks) - np.mean(cs))
    return total


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_ece_matches_a_hand_computed_example():
    conf = torch.tensor([0.05, 0.5, 0.55, 0.95, 1.0], dtype=torch.float64)
    correct = torch.tensor([False, True, False, True, True])
    # bins (1/15 wide): 0.05 -> bin 0; 0.5 -> bin 7; 0.55 -> bin 8; 0.95 and 1.0 -> bin 14.
    expected = (1 / 5) * 0.05 + (1 / 5) * 0.5 + (1 / 5) * 0.55 + (2 / 5) * abs(1.0 - 0.975)
    assert expected_calibration_error(conf, correct) == pytest.approx(expected, abs=1e-12)


def test_ece_out_of_range_confidences_count_in_total_only():
    conf = torch.tensor([2.5, -1.0, 0.5, 0.0])
    correct = torch.tensor([True, True, True, False])
    # Authors' variant: only 0.5 is binned ((0, 1], 0 excluded) -> 1/4 * |1 - 0.5|.
    assert expected_calibration_error(conf, correct, lowest_bin_closed=False) == pytest.approx(
        0.125
    )


def test_accuracy_counts_non_finite_rows_as_wrong():
    logits = torch.tensor([[1.0, 0.0], [float("nan"), 5.0], [0.0, 1.0]])
    assert accuracy(logits, torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)


def expected_paper_agreement(ref: np.ndarray, peer: np.ndarray, labels: np.ndarray) -> float:
    p_ref, p_peer = softmax(ref), softmax(peer)
    c_ref, c_peer = p_ref.max(1), p_peer.max(1)
    k_ref, k_peer = p_ref.argmax(1) == labels, p_peer.argmax(1) == labels
    a_acc = 1 - abs(k_ref.mean() - k_peer.mean())
    a_ece = 1 - abs(numpy_ece(c_ref, k_ref) - numpy_ece(c_peer, k_peer))
    a_conf = 1 - np.abs(c_ref - c_peer).mean()
    return (a_acc + a_ece + a_conf) / 3


def expected_authors_agreement(ref: np.ndarray, peer: np.ndarray, labels: np.ndarray) -> float:
    def ece_logits(logits):
        conf, correct = logits.max(1), logits.argmax(1) == labels
        total = 0.0
        for b in range(15):
            lo, hi = b / 15, (b + 1) / 15
            sel = (conf > lo) & (conf <= hi)
            if sel.any():
                total += sel.sum() / len(conf) * abs(correct[sel].mean() - conf[sel].mean())
        return total

    acc = lambda x: (x.argmax(1) == labels).mean()  # noqa: E731
    terms = [
        max(0.0, 1 - abs(acc(ref) - acc(peer))),
        max(0.0, 1 - abs(ece_logits(ref) - ece_logits(peer))),
        max(0.0, 1 - abs(ref.max(1).mean() - peer.max(1).mean())),
    ]
    return sum(terms) / 3


class LookupEvaluator(PeerEvaluator):
    """Maps a vector to fixed logits by its first entry (a stand-in for a real model)."""

    def __init__(self, table: dict[float, torch.Tensor]) -> None:
        super().__init__(predict=lambda v: table[float(v[0])], labels=LABELS)


def run_lightyear(params, round_index, peers_logits):
    own = torch.tensor([0.0, 1.0])
    vectors = [torch.tensor([float(i + 1), 10.0 * (i + 1)]) for i in range(len(peers_logits))]
    table = {0.0: REF_LOGITS, **{float(i + 1): lg for i, lg in enumerate(peers_logits)}}
    method = build_method("lightyear", params)
    result = method.aggregate_client(
        PeerView(
            round_index,
            0,
            own,
            list(range(1, len(vectors) + 1)),
            torch.stack(vectors),
            LookupEvaluator(table),
        )
    )
    return own, vectors, result


def test_paper_agreement_selection_and_update():
    bad = torch.tensor([[-3.0, 4.0, 2.0], [5.0, -1.0, 0.0], [0.0, 3.0, -2.0], [4.0, 0.0, 0.0]])
    nan = torch.full((4, 3), float("nan"))
    own, vectors, result = run_lightyear({"tau": 0.7, "gamma": 0.9}, 2, [PEER_LOGITS, bad, nan])
    expected_good = expected_paper_agreement(
        REF_LOGITS.double().numpy(), PEER_LOGITS.double().numpy(), LABELS.numpy()
    )
    expected_bad = expected_paper_agreement(
        REF_LOGITS.double().numpy(), bad.double().numpy(), LABELS.numpy()
    )
    assert result.scores[1] == pytest.approx(expected_good, abs=1e-7)
    assert result.scores[2] == pytest.approx(expected_bad, abs=1e-7)
    assert expected_good >= 0.7 > expected_bad
    assert math.isnan(result.scores[3])
    assert result.selected == [1]
    # theta_i + gamma^t * (1/|S|) * (theta_1 - theta_i), t = 2
    torch.testing.assert_close(result.vector, own + 0.81 * (vectors[0] - own))


def test_authors_variant_uses_max_logits_and_counts_own_model():
    own, vectors, result = run_lightyear(
        {"variant": "authors", "gamma": 0.95}, 1, [PEER_LOGITS, PEER_LOGITS + 0.05]
    )
    expected = expected_authors_agreement(
        REF_LOGITS.double().numpy(), PEER_LOGITS.double().numpy(), LABELS.numpy()
    )
    assert result.scores[1] == pytest.approx(expected, abs=1e-7)
    assert build_method("lightyear", {"variant": "authors"}).tau == 0.6
    assert result.selected == [1, 2]
    drift = (vectors[0] - own) + (vectors[1] - own)
    torch.testing.assert_close(result.vector, own + 0.95 / 3 * drift)


def test_empty_selection_keeps_own_model():
    bad = torch.tensor([[-3.0, 4.0, 2.0], [5.0, -1.0, 0.0], [0.0, 3.0, -2.0], [4.0, 0.0, 0.0]])
    own, _, result = run_lightyear({"tau": 0.99}, 0, [bad])
    assert result.selected == []
    assert torch.equal(result.vector, own)


@pytest.mark.parametrize(
    "params,message",
    [
        ({"tau": 1.5}, "tau: 1.5 is greater than the maximum of 1"),
        ({"variant": "x"}, "variant"),
        ({"beta": 1}, "unknown parameter 'beta'"),
    ],
)
def test_bad_lightyear_parameters(params, message):
    from benchlib.primitives.errors import BenchlibError

    with pytest.raises(BenchlibError, match=message):
        build_method("lightyear", params)


def metric_cases() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, logits, labels): ties, absent classes, broken rows, two classes, one sample."""
    gen = torch.Generator().manual_seed(7)
    cases = [
        (
            "10 classes",
            torch.randn(300, 10, generator=gen),
            torch.randint(0, 10, (300,), generator=gen),
        ),
        (
            "ties",
            torch.randint(0, 3, (200, 4), generator=gen).float(),
            torch.randint(0, 4, (200,), generator=gen),
        ),
        (
            "absent classes",
            torch.randn(50, 6, generator=gen),
            torch.randint(0, 3, (50,), generator=gen),
        ),
        (
            "two classes",
            torch.randn(80, 2, generator=gen),
            torch.randint(0, 2, (80,), generator=gen),
        ),
        ("one row", torch.randn(1, 3, generator=gen), torch.tensor([2])),
    ]
    broken = torch.randn(40, 5, generator=gen)
    broken[::7] = float("nan")
    cases.append(("non-finite rows", broken, torch.randint(0, 5, (40,), generator=gen)))
    return cases


@pytest.mark.parametrize(
    ("name", "logits", "labels"), [pytest.param(*case, id=case[0]) for case in metric_cases()]
)
def test_classification_metrics_equal_torchmetrics_bit_for_bit(name, logits, labels):
    """The task's own metrics give torchmetrics' float32 values exactly (the demo digest holds
    them), on ties, classes absent from the labels, NaN rows and the two-class AUROC."""
    import torchmetrics.functional.classification as tmc

    from benchlib.tasks.classification import Classification, safe_predictions, safe_probabilities

    metrics = Classification().metrics(logits, labels)
    predicted = safe_predictions(logits, labels)
    common = {"num_classes": logits.shape[1], "average": "macro"}
    expected = {
        "balanced_accuracy": tmc.multiclass_recall(predicted, labels, **common),
        "precision_macro": tmc.multiclass_precision(predicted, labels, **common),
        "recall_macro": tmc.multiclass_recall(predicted, labels, **common),
        "f1_macro": tmc.multiclass_f1_score(predicted, labels, **common),
    }
    if labels.unique().numel() > 1:
        probs = safe_probabilities(logits)
        expected["roc_auc"] = (
            tmc.binary_auroc(probs[:, 1], labels)
            if logits.shape[1] == 2
            else tmc.multiclass_auroc(probs, labels, num_classes=logits.shape[1])
        )
    else:
        assert math.isnan(metrics["roc_auc"])
    for key, value in expected.items():
        assert metrics[key] == float(value), (name, key)  # == on floats: the same bits


def test_regression_metrics_equal_torchmetrics_bit_for_bit():
    import torchmetrics.functional as tmf

    from benchlib.tasks.regression import Regression

    gen = torch.Generator().manual_seed(3)
    outputs, targets = torch.randn(97, 3, generator=gen), torch.randn(97, 3, generator=gen)
    metrics = Regression().metrics(outputs, targets)
    assert metrics["mse"] == float(tmf.mean_squared_error(outputs.double(), targets.double()))
    assert metrics["mae"] == float(tmf.mean_absolute_error(outputs.double(), targets.double()))
    assert metrics["mse"] == pytest.approx(float(((outputs - targets) ** 2).mean()))
