"""A dataset's ``training`` section as one typed, frozen value: :class:`TrainingSettings`.

Each field is declared once, with its type (a JSON-schema fragment), default and description in
the field's metadata; the config schema's ``training`` section, the parameter reference and the
engine all read this declaration. The config fills the defaults when it loads, so the engine
reads ``spec.training.lr``, never a dict with fallbacks. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from benchlib.params import UNSET, Param, Params


def _setting(schema: dict[str, Any], default: Any = UNSET, description: str = "") -> Any:
    """A field declared by its schema, default (:data:`UNSET`: the config must give it) and
    description."""
    metadata = {"schema": schema, "description": description}
    if default is UNSET:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, dict | list):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


POSITIVE_INT = {"type": "integer", "minimum": 1}


@dataclass(frozen=True)
class TrainingSettings:
    """How every client of a cell trains (a dataset's ``training`` section, defaults filled)."""

    optimizer: str = _setting({"enum": ["adam", "sgd"]}, description="local optimizer")
    lr: float = _setting({"type": "number", "exclusiveMinimum": 0}, description="learning rate")
    batch_size: int = _setting(POSITIVE_INT, description="local batch size")
    local_epochs: int = _setting(POSITIVE_INT, description="local epochs per round")
    rounds: int = _setting(POSITIVE_INT, description="communication rounds")
    weight_decay: float = _setting({"type": "number", "minimum": 0}, 0.0, "L2 weight decay")
    momentum: float = _setting(
        {"type": "number", "minimum": 0, "maximum": 1}, 0.0, "SGD momentum (sgd only)"
    )
    persist_optimizer: bool = _setting(
        {"type": "boolean"},
        True,
        "keep each client's optimizer state across rounds; false starts it fresh every round",
    )
    loss: str | None = _setting(
        {"type": ["string", "null"]}, None, "one of the task's losses; null = the task's default"
    )
    loss_params: Mapping[str, Any] = _setting(
        {"type": "object"}, {}, "the loss's parameters (benchlib params lists them)"
    )
    data_mode: str = _setting(
        {"enum": ["auto", "resident", "stream"]},
        "auto",
        "auto - client data resident on the device when small, else streamed from the "
        "memory-mapped store one batch at a time",
    )
    prefetch: int = _setting(
        {"type": "integer", "minimum": 0},
        2,
        "streamed data - batches read ahead of the training step by background threads; 0 = "
        "every step reads its own batch; no effect on the results",
    )
    client_batching: str = _setting(
        {"enum": ["auto", "on", "off"]},
        "auto",
        "auto - on a GPU, train all clients in lock-step as one batched computation when the "
        "model, loss, optimizer and method allow it; on - also on CPU; off - one after another",
    )
    cuda_graphs: bool = _setting(
        {"type": "boolean"},
        True,
        "batched clients on a GPU with resident data replay each step as one CUDA graph",
    )
    precision: str = _setting(
        {"enum": ["fp32", "tf32", "bf16"]},
        "fp32",
        "forwards in fp32; tf32 - TF32 matrix multiplications on CUDA; bf16 - autocast to "
        "bfloat16 (parameters, optimizer states and aggregation stay float32). The paper "
        "tables use fp32",
    )
    tensorboard: bool = _setting(
        {"type": "boolean"},
        False,
        "also write TensorBoard event files per cell (tensorboard/ beside its metrics.json; the "
        "tracking extra): per round each client's primary validation metric and validation "
        "loss, their means, the round's seconds and the method's summary (progress.jsonl then "
        "also carries val_loss). Changes no byte of metrics.json (and not the config hash)",
    )
    cpu_kernels: str = _setting(
        {"enum": ["portable", "native"]},
        "portable",
        "portable - CPU kernels capped at AVX2, so a CPU cell gives the same bytes on every "
        "x86-64 machine with AVX2 (AVX-512 ones included); native - the widest instructions "
        "the CPU has (numbers then depend on the machine); no effect on a GPU",
    )
    save_predictions: int = _setting(
        {"type": "integer", "minimum": 0},
        0,
        "segmentation - keep the predicted class maps of this many test samples per client in "
        "metrics.json",
    )
    held_out_rows: str = _setting(
        {"enum": ["all", "test"]},
        "all",
        "the rows held-out clients (which never train) are scored on - all: all of their data, "
        "every row being unseen; test: their test subset only, as federation clients",
    )
    round_metrics: Sequence[str] = _setting(
        {"type": "array", "items": {"type": "string"}},
        [],
        "test metrics (of the task's) recorded for every client after every round "
        "(metrics.json history.round_metrics)",
    )

    @classmethod
    def params(cls) -> Params:
        """The declaration of every field, as :class:`~benchlib.params.Params`."""
        entries = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                default = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                default = UNSET
            entries[f.name] = Param(
                f.metadata["schema"], default, f.metadata["description"], default is UNSET
            )
        return Params(entries)

    @classmethod
    def from_config(cls, what: str, section: Mapping[str, Any]) -> TrainingSettings:
        """Check a ``training`` section and fill its defaults (one error naming a bad key)."""
        return cls(**cls.params().resolve(what, section))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
