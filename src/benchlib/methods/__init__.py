"""Aggregation methods, one module each, behind one interface (see :mod:`.base`)."""

from benchlib.methods.base import (
    Method,
    P2PMethod,
    P2PResult,
    PeerEvaluator,
    PeerView,
    StarMethod,
    StarRound,
    TrainingContext,
    build_method,
    get_method_class,
    method_names,
    register_method,
)

__all__ = [
    "Method",
    "P2PMethod",
    "P2PResult",
    "PeerEvaluator",
    "PeerView",
    "StarMethod",
    "StarRound",
    "TrainingContext",
    "build_method",
    "get_method_class",
    "method_names",
    "register_method",
]
