"""LIGHTYEAR (Konstantin & Mukhopadhyay, "Don't Reach for the Stars", Sec. "Method").

Client i scores every received model j on its own validation set V_i against its reference
model theta_i (its model right after this round's local training):

    A_ij = (A_acc + A_ece + A_conf) / 3                                   (Eq. 12)
    A_acc  = 1 - |Acc(h_i; V_i) - Acc(h_j; V_i)|                          (Eq. 13)
    A_ece  = 1 - |ECE(h_i; V_i) - ECE(h_j; V_i)|  (15 equal-width bins)   (Eq. 14)
    A_conf = 1 - mean_x |P_i(x) - P_j(x)|, P = max softmax probability   (Eq. 15)

keeps S_i = {j : A_ij >= tau} (Eq. 17) and updates

    theta_i <- theta_i + gamma^t (1/|S_i|) sum_{j in S_i} (theta_j - theta_i)   (Eq. 18)

with t counted from 0; theta_i is unchanged when S_i is empty. A non-finite score (a NaN model)
is never selected.

``variant: authors`` reproduces the released code (MECLabTUDA/LIGHTYEAR,
p2p_lightyear_executor.py): tau defaults to 0.6; "confidence" is the maximum raw logit (not a
probability), used both for ECE (samples outside (0, 1] fall in no bin) and for a third term
1 - |mean max-logit_i - mean max-logit_j|; every term is clipped at 0; and the own model is
counted in the mean: theta_i + gamma^t/(|S_i|+1) sum_{j in S_i}(theta_j - theta_i).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from benchlib.methods.base import P2PMethod, P2PResult, PeerView
from benchlib.models.vectors import StackSpace
from benchlib.primitives.metrics import expected_calibration_error, finite_rows


@dataclass(frozen=True)
class ModelStats:
    """What the agreement score needs from one model on V_i."""

    accuracy: float
    ece: float
    confidence: torch.Tensor  # per-sample confidence


def model_stats(
    logits: torch.Tensor, labels: torch.Tensor, variant: str, quality: float | None = None
) -> ModelStats:
    """Accuracy, ECE and per-sample confidence of one model's logits on V_i.

    ``quality`` replaces accuracy in the first term where the task defines its own (segmentation:
    Dice, paper Eq. 16); ``logits`` are then per pixel.
    """
    logits = logits.double()
    valid = finite_rows(logits)
    correct = (logits.argmax(dim=1) == labels) & valid
    if variant == "paper":
        confidence = torch.softmax(logits, dim=1).max(dim=1).values
        ece = expected_calibration_error(confidence, correct, lowest_bin_closed=True)
    else:
        confidence = logits.max(dim=1).values
        ece = expected_calibration_error(confidence, correct, lowest_bin_closed=False)
    accuracy = correct.double().mean().item() if quality is None else quality
    return ModelStats(accuracy=accuracy, ece=ece, confidence=confidence)


def agreement(reference: ModelStats, other: ModelStats, variant: str) -> float:
    """The agreement score A_ij of ``other`` with ``reference`` (NaN for a broken model)."""
    a_acc = 1.0 - abs(reference.accuracy - other.accuracy)
    a_ece = 1.0 - abs(reference.ece - other.ece)
    if variant == "paper":
        a_conf = 1.0 - (reference.confidence - other.confidence).abs().mean().item()
    else:
        gap = abs(reference.confidence.mean().item() - other.confidence.mean().item())
        a_acc, a_ece, a_conf = max(0.0, a_acc), max(0.0, a_ece), max(0.0, 1.0 - gap)
    return (a_acc + a_ece + a_conf) / 3.0


class Lightyear(P2PMethod):
    description = "P2P; agreement-score selection on local validation data, gamma^t step"

    def __init__(self, *, tau: float, gamma: float, variant: str):
        self.variant = variant
        self.tau = float(tau)
        self.gamma = float(gamma)
        self._selected = StackSpace()  # the drift's gathered rows, memory reused every call

    def summary(self) -> dict[str, Any]:
        """The threshold and step actually used (the agreement view draws tau)."""
        return {"tau": self.tau, "gamma": self.gamma}

    def _stats(self, view: PeerView, vectors: Sequence[torch.Tensor]) -> list[ModelStats]:
        """Statistics of each of ``vectors`` on V_i (evaluated in one pass when the engine can
        batch models)."""
        return [
            model_stats(scoring.logits, scoring.labels, self.variant, scoring.quality)
            for scoring in view.evaluator.scoring_many(vectors)
        ]

    def aggregate_client(self, view: PeerView) -> P2PResult:
        own, peers, received = view.own, view.peers, view.received
        reference, *others = self._stats(view, [own, *received])
        scores: dict[int, float] = {}
        selected: list[int] = []
        rows_of_selected: list[int] = []  # their rows of received (a lookup each: n^3 a round)
        for row, (peer, stats) in enumerate(zip(peers, others, strict=True)):
            score = agreement(reference, stats, self.variant)
            scores[peer] = score
            if score == score and score >= self.tau:  # NaN never passes
                selected.append(peer)
                rows_of_selected.append(row)
        if not selected:
            return P2PResult(vector=own, selected=[], scores=scores)
        normaliser = len(selected) + (1 if self.variant == "authors" else 0)
        step = self.gamma**view.round / normaliser
        # sum_r (received[r] - own) over the gathered selected rows: the order of that float
        # sum is what earlier results were computed with
        rows = self._selected.stack([received[r] for r in rows_of_selected])
        drift = rows.sub_(own).sum(dim=0)
        return P2PResult(vector=own + step * drift, selected=selected, scores=scores)
