"""The cell spec: everything one FL run needs, resolved from the config (one owner of its keys).

The config resolves a :class:`CellSpec` per cell (:meth:`benchlib.config.Config.cell_spec`),
Snakemake passes it to ``benchlib run`` as JSON, the engine reads it, and metrics.json records
it; its hash names the run's checkpoints. Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from benchlib.errors import BenchlibError

TRAINING_KEYS = ("optimizer", "lr", "batch_size", "local_epochs", "rounds")


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
    training: dict[str, Any]
    method_params: dict[str, Any] = field(default_factory=dict)
    malfunction_params: dict[str, Any] = field(default_factory=dict)  # placement + per-name dicts
    task: str = "classification"
    transforms: dict[str, Any] = field(default_factory=dict)
    held_out: list[int] = field(default_factory=list)  # clients that never train
    axes: dict[str, Any] = field(default_factory=dict)  # extra grid axes that made this cell

    @classmethod
    def required_keys(cls) -> list[str]:
        return [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]

    @classmethod
    def from_dict(cls, raw: dict[str, Any], what: str = "--spec") -> CellSpec:
        """Build from the JSON form; one clear error naming missing or unknown keys."""
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
        lacking = [key for key in TRAINING_KEYS if key not in raw["training"]]
        if lacking:
            raise BenchlibError(
                f"{what} training lacks {', '.join(lacking)}; pass the spec the workflow generates"
            )
        return cls(**raw)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
