"""Inputs the aggregation tests hand to methods directly: a star round's facts and a peer
evaluator that must not be called."""

from __future__ import annotations

import torch

from benchlib.methods.base import PeerEvaluator, StarRound


def no_evaluator() -> PeerEvaluator:
    """A peer evaluator that fails the test when a method evaluates peers."""

    def fail(_: torch.Tensor) -> torch.Tensor:
        raise AssertionError("this method must not evaluate peers")

    return PeerEvaluator(fail, torch.zeros(1, dtype=torch.long))


def star_round(round: int, n: int) -> StarRound:
    """Round ``round`` of 10 with ``n`` clients of 10 samples and 10 batches each."""
    sizes = torch.full((n,), 10.0, dtype=torch.float64)
    return StarRound(round=round, num_rounds=10, train_sizes=sizes, batch_counts=sizes)
