"""A cell of the grid (:class:`Cell`) and its spec: everything one FL run needs, resolved from
the config (one owner of its keys).

The config resolves a :class:`CellSpec` per cell (:meth:`benchlib.config.Config.cell_spec`),
Snakemake passes it to ``benchlib run`` as JSON, the engine reads it, and metrics.json records
it; its hash names the run's checkpoints. Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from benchlib import layout
from benchlib.errors import BenchlibError
from benchlib.fl.malfunction_catalog import malfunction_settings
from benchlib.io import sha256_json
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import model_settings
from benchlib.settings import TrainingSettings
from benchlib.tasks.catalog import loss_settings

# Training settings that only change how a run is watched or checked: left out of metrics.json's
# config and of the config hash, so turning them on changes no byte of metrics.json and resumes
# checkpoints.
WATCH_KEYS = ("tensorboard", "verify_store")


@dataclass(frozen=True)
class Cell:
    """One FL run in the grid."""

    experiment: str
    malfunction: str
    method: str
    k: int
    seed: int

    @classmethod
    def parse(cls, text: str) -> Cell:
        """``experiment/malfunction/method/kK/seedS`` (the cell's :attr:`id`) -> Cell."""
        parts = text.strip("/").split("/")
        if len(parts) != 5 or not parts[3].startswith("k") or not parts[4].startswith("seed"):
            raise BenchlibError(f"cell {text!r} is not experiment/malfunction/method/kK/seedS")
        try:
            return cls(parts[0], parts[1], parts[2], int(parts[3][1:]), int(parts[4][4:]))
        except ValueError as exc:
            raise BenchlibError(f"cell {text!r}: k and seed must be integers") from exc

    @property
    def id(self) -> str:
        return f"{self.experiment}/{self.malfunction}/{self.method}/k{self.k}/seed{self.seed}"

    @property
    def run_dir(self) -> str:
        return layout.run_dir(self.id)

    @property
    def metrics_path(self) -> str:
        return layout.cell_metrics(self.id)

    @property
    def timing_path(self) -> str:
        return layout.cell_timing(self.id)

    @property
    def checkpoint_dir(self) -> str:
        return layout.checkpoint_dir(self.id)


@dataclass(frozen=True)
class CellSpec:
    """One resolved cell. ``from_dict``/``to_dict`` convert from/to the JSON form."""

    experiment: str
    dataset: str
    method_id: str
    method: str
    malfunction: str
    k: int
    seed: int
    clients: int
    model: dict[str, Any]  # {name, params, init: shared | per_client}
    training: TrainingSettings
    method_params: dict[str, Any] = field(default_factory=dict)
    malfunction_params: dict[str, Any] = field(default_factory=dict)  # placement + per-name dicts
    task: str = "classification"
    transforms: dict[str, Any] = field(default_factory=dict)
    held_out: list[int] = field(default_factory=list)  # clients that never train
    axes: dict[str, Any] = field(default_factory=dict)  # extra grid axes that made this cell
    # plugin package -> version of each plugin whose components the cell uses (its code's
    # identity: a new version changes the spec and so reruns the cell); absent when none
    plugins: dict[str, str] = field(default_factory=dict)

    @classmethod
    def required_keys(cls) -> list[str]:
        return [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]

    @classmethod
    def from_dict(cls, raw: dict[str, Any], what: str = "--spec") -> CellSpec:
        """Build from the JSON form, defaults filled; one clear error naming missing or unknown
        keys or a bad parameter."""
        names = {f.name for f in dataclasses.fields(cls)}
        missing = [key for key in cls.required_keys() if key not in raw]
        if missing:
            raise BenchlibError(
                f"{what} lacks {', '.join(missing)}; pass the spec the workflow generates "
                "(benchlib.config.Config.cell_spec)"
            )
        unknown = sorted(set(raw) - names)
        if unknown:
            raise BenchlibError(f"{what} has unknown keys {unknown}; regenerate it from the config")
        for key in ("k", "seed", "clients"):  # required keys: present here
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BenchlibError(
                    f"{what} {key} is {value!r}, not a non-negative integer; regenerate it from "
                    "the config"
                )
        training = raw["training"]
        if not isinstance(training, TrainingSettings):
            training = TrainingSettings.from_config(f"{what} training", training)
        return cls(**{**raw, "training": training}).resolved(f"{what} ")

    def resolved(self, what: str = "") -> CellSpec:
        """This spec with every parameter checked and every default filled (idempotent): the
        training settings and loss, the method's, model's and malfunction's parameters."""
        loss, loss_params = loss_settings(
            what, self.task, self.training.loss, self.training.loss_params
        )
        return dataclasses.replace(
            self,
            training=dataclasses.replace(self.training, loss=loss, loss_params=loss_params),
            method_params=METHODS.get(self.method).params.resolve(
                f"{what}method {self.method!r} params", self.method_params
            ),
            model=model_settings(what, self.model),
            malfunction_params=malfunction_settings(
                f"{what}malfunction", self.malfunction_params, [self.malfunction]
            ),
        )

    def to_dict(self) -> dict[str, Any]:
        raw = dataclasses.asdict(self)
        if not raw["plugins"]:  # a built-in-only cell's spec (and hash) names no plugins
            del raw["plugins"]
        return raw

    def recorded(self) -> dict[str, Any]:
        """The spec as metrics.json records it and its hash covers: without the settings that
        change how a run is watched, not its numbers (``training.tensorboard``)."""
        raw = self.to_dict()
        raw["training"] = {k: v for k, v in raw["training"].items() if k not in WATCH_KEYS}
        return raw

    def config_hash(self) -> str:
        """The hash metrics.json records and checkpoints carry (of the recorded spec)."""
        return sha256_json(self.recorded())

    def federation(self) -> list[int]:
        """The clients that train: all but the held-out ones (checked: at least two)."""
        held_out = set(self.held_out)
        if not all(0 <= c < self.clients for c in held_out):
            raise BenchlibError(
                f"held-out clients {sorted(held_out)} must be in 0..{self.clients - 1}"
            )
        federation = [c for c in range(self.clients) if c not in held_out]
        if len(federation) < 2:
            raise BenchlibError("a federation needs at least 2 training clients")
        return federation

    def summary(self) -> dict[str, Any]:
        """The keys that identify the cell in metrics.json and collected CSVs (plus one
        ``axis_<name>`` per scalar grid-axis value of a variant experiment)."""
        keys = ("experiment", "dataset", "method_id", "method", "malfunction", "k", "seed")
        axes = {
            f"axis_{name.replace('.', '_')}": value
            for name, value in self.axes.items()
            if isinstance(value, int | float | str)
        }
        return {**{key: getattr(self, key) for key in keys}, **axes}
