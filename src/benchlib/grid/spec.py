"""A cell of the grid (:class:`Cell`) and its spec (:class:`CellSpec`): everything one FL run
needs, resolved from the config - a versioned contract.

The config resolves a :class:`CellSpec` per cell
(:meth:`benchlib.configuration.config.Config.cell_spec`), Snakemake passes it to ``benchlib run`` as
JSON, ``benchlib run`` reads it (:meth:`CellSpec.from_text`), checks the JSON once against
:func:`spec_schema` (generated from the same declarations the config is checked with) and builds the
dataclass with no default filled again: a spec lacking a key was written by another version of
benchlib and must be regenerated. metrics.json records the spec and its hash names the run's
checkpoints (docs/develop/cell_spec.md). Every step's ``--spec`` argument is read by
:func:`parse_spec`. Torch-free.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib.declarations.malfunctions import MALFUNCTION_SETTINGS, MALFUNCTIONS
from benchlib.declarations.settings import Entry, TrainingSettings, TransformSettings
from benchlib.methods.catalog import METHODS
from benchlib.models.catalog import MODEL_INIT, MODELS, ModelSettings
from benchlib.primitives import layout
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.limits import MAX_CLIENTS, MAX_SEED
from benchlib.tasks.catalog import TASKS

# The version of the spec's JSON form: raised whenever a key is added, removed or changes meaning.
SPEC_VERSION = 1
REGENERATE = (
    "regenerate it from the config (snakemake reruns the cell; benchlib run-cell CONFIG CELL "
    "runs one by its id)"
)

# Training settings that only change how a run is watched or checked: left out of metrics.json's
# config and of the config hash, so turning them on changes no byte of metrics.json and resumes
# checkpoints.
WATCH_KEYS = ("tensorboard", "verify_store")


def parse_spec(text: str) -> dict[str, Any]:
    """A step's ``--spec``: a JSON object given inline, as ``@path`` or as ``@-`` (standard
    input: the workflow pipes a report's spec, which can outgrow the 128 KiB the kernel allows
    one command-line argument); one error line when it is not one."""
    if text == "@-":
        text = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    elif text.startswith("@"):
        path = Path(text[1:])
        if not path.is_file():
            raise BenchlibError(f"spec file {path} not found")
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BenchlibError(f"spec file {path} is not UTF-8 JSON; regenerate it") from exc
    try:
        spec = json.loads(text, parse_constant=_not_finite)
    except json.JSONDecodeError as exc:
        raise BenchlibError(f"--spec is not valid JSON ({exc.msg}); pass a JSON object") from exc
    except RecursionError:  # [[[...]]] deeper than the parser goes
        raise BenchlibError(
            "--spec is not valid JSON (nested too deeply); pass a JSON object"
        ) from None
    if not isinstance(spec, dict):
        raise BenchlibError("--spec must be a JSON object")
    return spec


def _not_finite(name: str) -> None:
    """Python's JSON reads NaN and Infinity; a spec never holds them (every hash refuses them)."""
    raise BenchlibError(
        f"--spec holds {name}, not a finite number; pass the spec the workflow generates"
    )


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


@dataclass(frozen=True, eq=False)
class CellSpec(Entry):
    """One resolved cell: every setting its run uses, every default filled (the JSON form is
    :meth:`to_dict`; :meth:`from_json` reads it back)."""

    experiment: str
    dataset: str
    method_id: str
    method: str
    malfunction: str
    k: int
    seed: int
    clients: int
    model: ModelSettings
    training: TrainingSettings
    method_params: Mapping[str, Any]
    malfunction_params: Mapping[str, Any]  # placement, start_round + per-malfunction parameters
    task: str
    transforms: TransformSettings
    held_out: tuple[int, ...]  # clients that never train
    axes: Mapping[str, Any]  # extra grid axes that made this cell
    # plugin package -> version of each plugin whose components the cell uses (its code's
    # identity: a new version changes the spec and so reruns the cell); {} when none
    plugins: Mapping[str, str]
    version: int = SPEC_VERSION

    @classmethod
    def from_text(cls, text: str) -> CellSpec:
        """The spec ``benchlib run --spec`` gives (JSON inline or ``@path``), checked once."""
        return cls.from_json(parse_spec(text))

    @classmethod
    def from_json(cls, raw: Mapping[str, Any], what: str = "--spec") -> CellSpec:
        """Check the JSON form once against :func:`spec_schema` and build the spec; one error
        line naming the first problem (a missing key or another version: a stale spec)."""
        if not isinstance(raw, Mapping):
            raise BenchlibError(f"{what} must be a JSON object")
        missing = [name for name in cls.field_names() if name not in raw]
        if missing:
            raise BenchlibError(f"{what} lacks {', '.join(missing)}: a stale spec; {REGENERATE}")
        if raw["version"] != SPEC_VERSION:
            raise BenchlibError(
                f"{what} is cell spec version {raw['version']!r}, this benchlib reads version "
                f"{SPEC_VERSION}: a stale spec; {REGENERATE}"
            )
        for registry, name in (
            (METHODS, raw["method"]),
            (MALFUNCTIONS, raw["malfunction"]),
            (TASKS, raw["task"]),
            (MODELS, raw["model"].get("name") if isinstance(raw["model"], Mapping) else None),
        ):
            if isinstance(name, str) and name not in registry:
                raise BenchlibError(f"{what}: {registry.unknown(name)}")
        _check(what, raw)
        return cls(
            **{
                **{name: raw[name] for name in cls.field_names()},
                "model": ModelSettings(**raw["model"]),
                "training": TrainingSettings(**raw["training"]),
                "transforms": TransformSettings(**raw["transforms"]),
                "held_out": tuple(raw["held_out"]),
            }
        )

    def to_json(self) -> str:
        """The canonical JSON form (sorted keys, compact): what ``benchlib run --spec`` takes."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    def recorded(self) -> dict[str, Any]:
        """The spec as metrics.json records it and its hash covers: without the settings that
        change how a run is watched, not its numbers (``training.tensorboard``)."""
        raw = self.to_dict()
        raw["training"] = {k: v for k, v in raw["training"].items() if k not in WATCH_KEYS}
        return raw

    def config_hash(self) -> str:
        """The hash metrics.json records and checkpoints carry: SHA-256 of the recorded spec's
        canonical JSON (sorted keys, 2-space indent, trailing newline: the bytes
        :func:`benchlib.primitives.io.dumps_json` writes, so every recorded hash stays valid)."""
        text = json.dumps(self.recorded(), indent=2, sort_keys=True, allow_nan=False) + "\n"
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def components(self) -> list[tuple[str, str]]:
        """The registered components the spec names, as (registry kind, name): its method,
        model, malfunction and task (declaration and implementation), and the grid axes and
        readings of a variant experiment. (A ``<malfunction>.<parameter>`` axis adds nothing:
        the cell's own malfunction is listed, and another's parameter does not reach its
        numbers.)"""
        from benchlib.grid.axes import READING_PREFIX

        components = [
            ("method", self.method),
            ("model", self.model["name"]),
            ("malfunction", self.malfunction),
            ("task", self.task),
            ("task implementation", self.task),
        ]
        for axis in self.axes:
            if axis.startswith(READING_PREFIX):
                components.append(("reading", axis.removeprefix(READING_PREFIX)))
            elif "." not in axis:
                components.append(("grid axis", axis))
        return components

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


def _complete(schema: Mapping[str, Any]) -> dict[str, Any]:
    """An object schema whose every property is required (the spec holds every key filled)."""
    return {**schema, "required": sorted(schema["properties"])}


def _when(key: str, value: str, then: Mapping[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": {key: {"const": value}}}, "then": {"properties": dict(then)}}


def spec_schema() -> dict[str, Any]:
    """The JSON schema of a cell spec, generated from the declarations the config is checked
    with (training, transforms, and the parameters of every method, model, malfunction and
    loss, built-in or a plugin's): each key required, unknown keys refused."""
    count = {"type": "integer", "minimum": 0}
    malfunction = {
        **{name: param.json_schema() for name, param in MALFUNCTION_SETTINGS.items()},
        **{name: d.params.filled_schema() for name, d in MALFUNCTIONS.items()},
    }
    conditions = [
        _when("method", name, {"method_params": d.params.filled_schema()})
        for name, d in METHODS.items()
    ]
    conditions += [
        {
            "if": {"properties": {"model": {"properties": {"name": {"const": name}}}}},
            "then": {"properties": {"model": {"properties": {"params": d.params.filled_schema()}}}},
        }
        for name, d in MODELS.items()
    ]
    conditions += [
        {
            "if": {
                "properties": {
                    "task": {"const": task},
                    "training": {"properties": {"loss": {"const": loss}}},
                }
            },
            "then": {
                "properties": {"training": {"properties": {"loss_params": p.filled_schema()}}}
            },
        }
        for task, entry in TASKS.items()
        for loss, p in entry.losses.items()
    ]
    training = TrainingSettings.params().schema()
    training["properties"]["loss"] = {"type": "string"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"benchlib cell spec, version {SPEC_VERSION}",
        "type": "object",
        "additionalProperties": False,
        "required": sorted(f.name for f in dataclasses.fields(CellSpec)),
        "properties": {
            "version": {"const": SPEC_VERSION},
            "experiment": {"type": "string"},
            "dataset": {"type": "string"},
            "method_id": {"type": "string"},
            "method": {"enum": METHODS.names()},
            "malfunction": {"enum": MALFUNCTIONS.names()},
            "k": count,
            "seed": {**count, "maximum": MAX_SEED},
            "clients": {"type": "integer", "minimum": 2, "maximum": MAX_CLIENTS},
            "model": {
                "type": "object",
                "additionalProperties": False,
                "required": ["init", "name", "params"],
                "properties": {
                    "name": {"enum": MODELS.names()},
                    "params": {"type": "object"},
                    "init": MODEL_INIT.json_schema(),
                },
            },
            "training": _complete(training),
            "method_params": {"type": "object"},
            "malfunction_params": {
                "type": "object",
                "additionalProperties": False,
                "required": sorted(MALFUNCTION_SETTINGS),
                "properties": malfunction,
            },
            "task": {"enum": TASKS.names()},
            "transforms": _complete(TransformSettings.params().schema()),
            "held_out": {"type": "array", "uniqueItems": True, "items": count},
            "axes": {"type": "object"},
            "plugins": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        "allOf": conditions,
    }


def _check(what: str, raw: Mapping[str, Any]) -> None:
    """Validate ``raw`` against :func:`spec_schema`: one error line for the first problem."""
    import jsonschema

    from benchlib.declarations.params import bound_fix

    validator = jsonschema.Draft202012Validator(spec_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return
    error = _deepest(errors[0])
    path = [str(p) for p in error.absolute_path]
    if error.validator == "required":
        where = ".".join(path) or "the spec"
        raise BenchlibError(f"{what} {where}: {error.message}: a stale spec; {REGENERATE}")
    if len(path) >= 2:
        where = f"{path[0]}: {'.'.join(path[1:])}"
    else:
        where = ".".join(path) or "(top level)"
    raise BenchlibError(f"{what} {where}: {error.message}{bound_fix(error)}")


def _deepest(error: Any) -> Any:
    """The innermost error of an ``allOf``/``if-then`` failure (the one naming the key)."""
    while error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    return error
