"""A dataset's sections as typed, frozen values: ``training`` (:class:`TrainingSettings`),
``split`` (:class:`SplitSettings`) and ``transforms`` (:class:`TransformSettings`).

Each field is declared once, with its type (a JSON-schema fragment), default and description in
the field's metadata; the config schema's section, the parameter reference and the code that
uses the section all read this declaration. The config fills the defaults once, when it loads;
the cell and dataset specs carry the filled sections, and the engine reads
``spec.training.lr``, never a dict with fallbacks. A settings value is also read by key
(``settings["lr"]``), as the config's YAML names it. Torch-free.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Self

from benchlib.declarations.params import UNSET, Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.limits import (
    MAX_BATCH_SIZE,
    MAX_INPUT_SIZE,
    MAX_LOCAL_EPOCHS,
    MAX_LR,
    MAX_PREFETCH,
    MAX_ROUNDS,
    MAX_SAVED_PREDICTIONS,
    MAX_SEED,
)

# Training augmentations a dataset may list (torchvision.transforms.v2 classes, applied per sample).
TRANSFORMS = (
    "ColorJitter",
    "GaussianBlur",
    "RandomAffine",
    "RandomCrop",
    "RandomErasing",
    "RandomHorizontalFlip",
    "RandomResizedCrop",
    "RandomRotation",
    "RandomVerticalFlip",
)


def setting(schema: dict[str, Any], default: Any = UNSET, description: str = "") -> Any:
    """A field declared by its schema, default (:data:`UNSET`: the config must give it) and
    description."""
    metadata = {"schema": schema, "description": description}
    if default is UNSET:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, dict | list):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def positive_int(maximum: int) -> dict[str, Any]:
    """The schema of a count from 1 to ``maximum`` (:mod:`benchlib.primitives.limits`)."""
    return {"type": "integer", "minimum": 1, "maximum": maximum}


class Entry(Mapping[str, Any]):
    """A frozen dataclass (``eq=False``: it compares as below) read by attribute or, like the
    config section it comes from, by key (``entry["clients"]``): the typed form of a resolved
    config entry."""

    def __getitem__(self, key: str) -> Any:
        if key not in self.field_names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.field_names())

    def __len__(self) -> int:
        return len(self.field_names())

    def __eq__(self, other: object) -> bool:
        """Equal to an entry of its type with equal fields, or to a mapping with the same keys
        and equal values (the section as a config or a JSON spec gives it)."""
        if isinstance(other, Entry):
            return type(self) is type(other) and tuple(self.values()) == tuple(other.values())
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # holds mappings

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (nested entries and mappings as dicts, tuples as lists)."""
        return {name: jsonable(getattr(self, name)) for name in self.field_names()}


def jsonable(value: Any) -> Any:
    """``value`` with entries and mappings as dicts and tuples as lists (for JSON)."""
    if isinstance(value, Entry):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


class Settings(Entry):
    """An :class:`Entry` whose fields are declared with :func:`setting`."""

    @classmethod
    def params(cls) -> Params:
        """The declaration of every field, as :class:`~benchlib.declarations.params.Params`."""
        entries = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
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
    def from_config(cls, what: str, section: Mapping[str, Any] | None) -> Self:
        """Check a section and fill its defaults (one error naming a bad key)."""
        return cls(**cls.params().resolve(what, section))

    @classmethod
    def from_filled(cls, what: str, section: Mapping[str, Any]) -> Self:
        """Build from a section the config filled (a spec's JSON, its types checked by the spec
        schema): every key present, no default filled again; a missing key means the spec was
        written by an older benchlib."""
        missing = [name for name in cls.field_names() if name not in section]
        if missing:
            raise BenchlibError(
                f"{what} lacks {', '.join(missing)}: a stale spec from an older benchlib; "
                "regenerate it from the config"
            )
        return cls(**{name: section[name] for name in cls.field_names()})


@dataclass(frozen=True, eq=False)
class TrainingSettings(Settings):
    """How every client of a cell trains (a dataset's ``training`` section, defaults filled)."""

    optimizer: str = setting({"enum": ["adam", "sgd"]}, description="local optimizer")
    lr: float = setting(
        {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_LR}, description="learning rate"
    )
    batch_size: int = setting(positive_int(MAX_BATCH_SIZE), description="local batch size")
    local_epochs: int = setting(
        positive_int(MAX_LOCAL_EPOCHS), description="local epochs per round"
    )
    rounds: int = setting(positive_int(MAX_ROUNDS), description="communication rounds")
    weight_decay: float = setting({"type": "number", "minimum": 0}, 0.0, "L2 weight decay")
    momentum: float = setting(
        {"type": "number", "minimum": 0, "maximum": 1}, 0.0, "SGD momentum (sgd only)"
    )
    persist_optimizer: bool = setting(
        {"type": "boolean"},
        True,
        "keep each client's optimizer state across rounds; false starts it fresh every round",
    )
    loss: str | None = setting(
        {"type": ["string", "null"]}, None, "one of the task's losses; null = the task's default"
    )
    loss_params: Mapping[str, Any] = setting(
        {"type": "object"}, {}, "the loss's parameters (benchlib params lists them)"
    )
    data_mode: str = setting(
        {"enum": ["auto", "resident", "stream"]},
        "auto",
        "auto - client data resident on the device when small, else streamed from the "
        "memory-mapped store one batch at a time",
    )
    prefetch: int = setting(
        {"type": "integer", "minimum": 0, "maximum": MAX_PREFETCH},
        2,
        "streamed data - batches read ahead of the training step by background threads; 0 = "
        "every step reads its own batch; no effect on the results",
    )
    client_batching: str = setting(
        {"enum": ["auto", "on", "off"]},
        "auto",
        "auto - on a GPU, train all clients in lock-step as one batched computation when the "
        "model, loss, optimizer and method allow it; on - also on CPU; off - one after another",
    )
    cuda_graphs: bool = setting(
        {"type": "boolean"},
        True,
        "batched clients on a GPU with resident data replay each step as one CUDA graph",
    )
    precision: str = setting(
        {"enum": ["fp32", "tf32", "bf16"]},
        "fp32",
        "forwards in fp32; tf32 - TF32 matrix multiplications on CUDA; bf16 - autocast to "
        "bfloat16 (parameters, optimizer states and aggregation stay float32). The paper "
        "tables use fp32",
    )
    tensorboard: bool = setting(
        {"type": "boolean"},
        False,
        "also write TensorBoard event files per cell (tensorboard/ beside its metrics.json; the "
        "tracking extra): per round each client's primary validation metric and validation "
        "loss, their means, the round's seconds and the method's summary (progress.jsonl then "
        "also carries val_loss). Changes no byte of metrics.json (and not the config hash)",
    )
    cpu_kernels: str = setting(
        {"enum": ["portable", "native"]},
        "portable",
        "portable - CPU kernels capped at AVX2, so a CPU cell gives the same bytes on every "
        "x86-64 machine with AVX2 (AVX-512 ones included); native - the widest instructions "
        "the CPU has (numbers then depend on the machine); no effect on a GPU",
    )
    save_predictions: int = setting(
        {"type": "integer", "minimum": 0, "maximum": MAX_SAVED_PREDICTIONS},
        0,
        "segmentation - keep the predicted class maps of this many test samples per client in "
        "metrics.json",
    )
    held_out_rows: str = setting(
        {"enum": ["all", "test"]},
        "all",
        "the rows held-out clients (which never train) are scored on - all: all of their data, "
        "every row being unseen; test: their test subset only, as federation clients",
    )
    verify_store: bool = setting(
        {"type": "boolean"},
        False,
        "read and re-hash the whole store before the cell trains, as benchlib verify-store "
        "does (every file's sha256, finite floats, masks within the class count), not only "
        "its manifest, sizes, index and array headers; no effect on the results (and not the "
        "config hash)",
    )
    round_metrics: Sequence[str] = setting(
        {"type": "array", "items": {"type": "string"}},
        [],
        "test metrics (of the task's) recorded for every client after every round "
        "(metrics.json history.round_metrics)",
    )

    def optimizer_fields(self) -> dict[str, Any]:
        """The fields the optimizer is built from (:func:`benchlib.fl.optim.build_optimizer`
        takes them as keywords; it reads nothing else of the section)."""
        return {
            "optimizer": self.optimizer,
            "lr": self.lr,
            "momentum": self.momentum,
            "weight_decay": self.weight_decay,
        }


def parse_fraction(value: float | str, what: str) -> Fraction:
    """A fraction in (0, 1) given as a number or an exact ratio string such as ``"1/3"``."""
    try:
        fraction = Fraction(str(value))
    except (ValueError, ZeroDivisionError) as exc:
        raise BenchlibError(f"{what}={value!r} is not a number or a ratio like 1/3") from exc
    require(0 < fraction < 1, f"{what}={value!r} must be between 0 and 1 (exclusive)")
    return fraction


SHARE = {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
RATIO = [
    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    {"type": "string", "pattern": "^[0-9]+/[0-9]+$"},
]
SOURCE_KEYS = ("val_from_test", "val_from_train")


@dataclass(frozen=True, eq=False)
class SplitSettings(Settings):
    """Which subset (train / val / test) each client's samples fall in (a dataset's ``split``
    section, defaults filled; :mod:`benchlib.data.split` applies it)."""

    mode: str = setting(
        {"enum": ["random", "source"]},
        "random",
        "random - seeded fractions val and test of each client's pooled samples; source - the "
        "store's train/test, with val_from_test of each client's test (or val_from_train of its "
        "train) moved to val",
    )
    val: float = setting(
        SHARE, 0.0, "random mode (given there) - share of each client's samples in val"
    )
    test: float = setting(
        SHARE, 0.0, "random mode (given there) - share of each client's samples in test"
    )
    seed: int = setting(
        {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
        0,
        "seed of the partition, the subsets and a corruption's choice of clients",
    )
    val_from_test: float | str = setting(
        {"oneOf": RATIO},
        "1/3",
        "source mode - share of each client's test samples moved to val (a number or a ratio "
        "like 1/3)",
    )
    val_from_train: float | str | None = setting(
        {"oneOf": [*RATIO, {"type": "null"}]},
        None,
        "source mode, instead of val_from_test - share of each client's train samples moved to "
        "val (test stays whole)",
    )

    @classmethod
    def from_config(cls, what: str, section: Mapping[str, Any] | None) -> Self:
        """Check the keys, then the mode's rules on the keys given, and fill the defaults."""
        settings = super().from_config(what, section)
        given = set(section or {})
        if settings.mode == "source":
            require(
                not given & {"val", "test"},
                "split.mode source takes split.val_from_test, not split.val / split.test (the "
                "source fixes train and test); remove them",
            )
            require(
                not set(SOURCE_KEYS) <= given,
                "split.val_from_test and split.val_from_train exclude each other; keep one",
            )
            require(
                bool(given & set(SOURCE_KEYS)),
                "split.mode source needs split.val_from_test or split.val_from_train (the share "
                "of each client's test or train samples moved to val)",
            )
        else:
            for key in SOURCE_KEYS:
                require(
                    key not in given,
                    f"split.{key} applies only to split.mode source; remove it or set the mode",
                )
            require(
                {"val", "test"} <= given,
                "split.mode random needs split.val and split.test (shares of each client's "
                "samples); give both",
            )
        require(
            settings.val + settings.test < 1,
            f"split.val + split.test = {settings.val + settings.test:g} leaves no training "
            "data; make their sum less than 1",
        )
        # a bad ratio (3/2) stops the config, not the split step
        parse_fraction(settings.val_from_test, "split.val_from_test")
        if settings.val_from_train is not None:
            parse_fraction(settings.val_from_train, "split.val_from_train")
        return settings


NORMALIZE = {
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["mean", "std"],
    "properties": {
        "mean": {"type": "array", "items": {"type": "number"}, "minItems": 1},
        "std": {"type": "array", "items": {"type": "number", "exclusiveMinimum": 0}, "minItems": 1},
    },
}
AUGMENTATION = {
    "type": "object",
    "required": ["name"],
    "properties": {"name": {"enum": list(TRANSFORMS)}},
}


@dataclass(frozen=True, eq=False)
class TransformSettings(Settings):
    """A dataset's input transforms (its ``transforms`` section, defaults filled;
    :mod:`benchlib.fl.transforms` applies them)."""

    normalize: Mapping[str, Sequence[float]] | None = setting(
        NORMALIZE, None, "{mean, std} per channel, applied to every batch; null = none"
    )
    input_size: int | None = setting(
        {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_INPUT_SIZE},
        None,
        "side of the model's square input; other batches are fitted to it; null = as stored",
    )
    eval_crop: int | None = setting(
        {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_INPUT_SIZE},
        None,
        "centre crop before resizing to input_size (evaluation batches); null = none",
    )
    train: Sequence[Mapping[str, Any]] = setting(
        {"type": "array", "items": AUGMENTATION},
        [],
        "torchvision.transforms.v2 augmentations ({name, ...its arguments}), random parameters "
        "per sample, training batches only",
    )
