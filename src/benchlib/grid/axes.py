"""Grid axes beyond (malfunction, method, k, seed): one registry, used by every suite.

An experiment may sweep further settings with ``axes: {<axis>: [values...]}``; the config then
holds one *variant* experiment per combination of values, named
``<experiment>__<axis>_<value>[__<axis>_<value>...]`` (so every variant has its own tables,
figures and run folders), and records the values in each cell's spec (``axes``) and so in
metrics.json and the collected CSVs. Axes that change the clients' data (number of clients,
partitioner) give the variant its own dataset entry (``<dataset>__...``): its own split, but the
base dataset's prepared store.

Axes:

- ``clients``: the number of clients (an int);
- ``partition``: the partitioner and its parameters (a mapping like a dataset's ``partition``);
- ``held_out``: the clients that never train (a list of client ids; leave-one-domain-out);
- ``corruption``: FedAgain's corrupted clients (a scenario name or ``{ratio, severity}``; same
  split, the cell reads a corrupted copy of the store);
- ``<malfunction>.<parameter>``: a malfunction parameter (e.g. ``ana.scale``);
- ``reading.<name>``: a declared reading's alternatives (:mod:`benchlib.grid.readings`). A reading
  sets method parameters and/or dataset settings. The reading's default alternative is left out of
  the variant's name, and a method that no swept reading concerns is not run again per reading:
  its cells are those of the variant with the readings it does not depend on at their defaults
  (so every reading axis must list its default).

Adding an axis = one :func:`register_axis` entry here.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchlib.declarations.malfunctions import MALFUNCTIONS
from benchlib.declarations.registry import Registry
from benchlib.grid.readings import READINGS, Reading, apply_dataset_settings
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.limits import MAX_CLIENTS

SEPARATOR = "__"
READING_PREFIX = "reading."


@dataclass(frozen=True)
class Axis:
    """How one axis value changes a dataset's config entry; ``data`` axes change the split."""

    apply: Callable[[dict[str, Any], Any], None]
    data: bool
    description: str = ""
    reading: Reading | None = None  # a ``reading.<name>`` axis: the reading it sweeps


AXES: Registry[Axis] = Registry("grid axis")


def register_axis(name: str, data: bool, description: str) -> Callable[[Callable], Callable]:
    """Register an axis: how a value changes a dataset entry, whether it changes the split,
    and what its values are (for the parameter reference)."""

    def decorate(apply: Callable[[dict[str, Any], Any], None]) -> Callable:
        AXES.add(name, Axis(apply, data, description))
        return apply

    return decorate


@register_axis(
    "clients", data=True, description=f"number of clients (an int from 2 to {MAX_CLIENTS})"
)
def _clients(dataset: dict[str, Any], value: Any) -> None:
    require(
        isinstance(value, int) and 2 <= value <= MAX_CLIENTS,
        f"axis clients: {value!r} is not an int from 2 to {MAX_CLIENTS}; give a number of "
        "clients in that range",
    )
    dataset["clients"] = value


@register_axis(
    "partition", data=True, description="a partition mapping with a name (see Partitioners)"
)
def _partition(dataset: dict[str, Any], value: Any) -> None:
    require(
        isinstance(value, dict) and "name" in value,
        f"axis partition: {value!r} is not a partition mapping with a name",
    )
    dataset["partition"] = dict(value)


@register_axis(
    "held_out", data=False, description="list of client ids that never train (leave-one-out)"
)
def _held_out(dataset: dict[str, Any], value: Any) -> None:
    require(
        isinstance(value, list) and all(isinstance(c, int) for c in value),
        f"axis held_out: {value!r} is not a list of client ids",
    )
    dataset["held_out"] = list(value)


@register_axis(
    "corruption",
    data=False,
    description="FedAgain corruption: a scenario name or {ratio, severity[, subsets]}",
)
def _corruption(dataset: dict[str, Any], value: Any) -> None:
    """FedAgain's corrupted clients: same split, a corrupted copy of the store."""
    from benchlib.data.corruptions import scenario_of

    scenario_of(value)
    dataset["corruption"] = value


def _malfunction_param(name: str) -> Axis | None:
    """``<malfunction>.<parameter>`` axes, for every parameter the catalog declares."""
    malfunction, _, param = name.partition(".")
    if malfunction in MALFUNCTIONS and param in MALFUNCTIONS.get(malfunction).params:

        def apply(dataset: dict[str, Any], value: Any) -> None:
            section = dataset.setdefault("malfunction", {})
            section[malfunction] = {**section.get(malfunction, {}), param: value}

        return Axis(apply, data=False)
    return None


def _reading_axis(name: str) -> Axis | None:
    """``reading.<name>`` axes, for every declared reading: a value is an alternative's name."""
    if not name.startswith(READING_PREFIX):
        return None
    reading = READINGS.get(name.removeprefix(READING_PREFIX))

    def apply(dataset: dict[str, Any], value: Any) -> None:
        alternative = reading.alternative(value)
        if value != reading.default:  # at the default, the dataset's own settings stand
            apply_dataset_settings(dataset, alternative)

    return Axis(apply, data=False, description=reading.question, reading=reading)


def get_axis(name: str) -> Axis:
    """The axis ``name`` (a registered axis, a malfunction parameter or a reading)."""
    found = _malfunction_param(name) or _reading_axis(name)
    if found is not None:
        return found
    if name not in AXES:
        params = [f"{m}.{p}" for m, spec in MALFUNCTIONS.items() for p in spec.params]
        readings = [f"{READING_PREFIX}{r}" for r in READINGS.names()]
        raise BenchlibError(
            f"unknown grid axis {name!r}; choose one of: "
            f"{', '.join(AXES.names() + params + readings)}"
        )
    return AXES.get(name)


def value_label(value: Any) -> str:
    """A path-safe label of an axis value: ``1.5`` -> ``1p5``, ``{name: dirichlet, alpha:
    0.5}`` -> ``dirichlet_alpha0p5``, ``[0, 2]`` -> ``0_2``."""
    if isinstance(value, dict):
        parts = [str(value.get("name", ""))]
        parts += [f"{k}{value_label(v)}" for k, v in sorted(value.items()) if k != "name"]
        return "_".join(p for p in parts if p)
    if isinstance(value, list):
        return "_".join(value_label(v) for v in value) or "none"
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return re.sub(r"[^a-z0-9]", "", text.lower().replace(".", "p").replace("-", "m"))


def variants(axes: dict[str, list[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(name suffix, {axis: value}) for every combination of the axes' values, in order."""
    names = list(axes)
    for name in names:
        reading = get_axis(name).reading
        require(bool(axes[name]), f"grid axis {name} has no values")
        if reading is not None:
            for value in axes[name]:
                reading.alternative(value)
            require(
                reading.default in axes[name],
                f"grid axis {name} must list the reading's default {reading.default!r} (the "
                "cells of the methods it does not concern are those of the default)",
            )
    result = []
    for values in itertools.product(*(axes[name] for name in names)):
        chosen = dict(zip(names, values, strict=True))
        result.append((variant_suffix(chosen), chosen))
    require(
        len({suffix for suffix, _ in result}) == len(result),
        f"grid axes {names}: two values have the same label; make them distinct",
    )
    return result


def reading_combinations(
    listed: list[dict[str, Any]], methods: list[str]
) -> list[tuple[str, dict[str, Any], list[str] | None]]:
    """(name suffix, {axis: value}, homed) for an experiment's ``combinations``: the listed
    combinations of ``reading.<name>`` axes (e.g. one reading varied at a time from a base),
    each completed with the defaults of the swept readings it does not name (``homed`` None),
    then every combination whose cells a listed one shares for a registered method of
    ``methods`` (its *home*: the readings that do not concern the method at their defaults),
    with ``homed`` the registered methods whose cells it holds: only those run there."""
    require(bool(listed), "combinations has no entries")
    names: list[str] = []
    for combo in listed:
        require(isinstance(combo, dict), "each entry of combinations must be a mapping")
        for axis in combo:
            require(
                get_axis(axis).reading is not None,
                f"combinations lists {axis!r}; only reading.<name> axes can be combined so",
            )
            if axis not in names:
                names.append(axis)
    readings = {axis: get_axis(axis).reading for axis in names}

    def complete(combo: dict[str, Any]) -> dict[str, Any]:
        chosen = {axis: combo.get(axis, readings[axis].default) for axis in names}
        for axis, value in chosen.items():
            readings[axis].alternative(value)
        return chosen

    result: list[tuple[str, dict[str, Any], list[str] | None]] = []
    for combo in listed:
        chosen = complete(combo)
        suffix = variant_suffix(chosen)
        require(all(suffix != r[0] for r in result), f"combinations lists {chosen} twice")
        result.append((suffix, chosen, None))
    implied: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for _, chosen, _ in list(result):
        for method in methods:
            home = {
                axis: value if readings[axis].concerns(method) else readings[axis].default
                for axis, value in chosen.items()
            }
            at = variant_suffix(home)
            if any(at == r[0] for r in result):
                continue
            homed = implied.setdefault(at, (home, []))[1]
            if method not in homed:
                homed.append(method)
    result += [(suffix, home, homed) for suffix, (home, homed) in implied.items()]
    return result


def variant_suffix(chosen: dict[str, Any]) -> str:
    """The name suffix of one combination of axis values (a reading's default left out)."""
    return SEPARATOR.join(
        f"{name.replace('.', '_')}_{value_label(value)}"
        for name, value in chosen.items()
        if not is_default_reading(name, value)
    )


def is_default_reading(name: str, value: Any) -> bool:
    """Whether axis ``name`` is a reading and ``value`` its default alternative."""
    reading = get_axis(name).reading
    return reading is not None and value == reading.default


def apply_axes(dataset: dict[str, Any], chosen: dict[str, Any]) -> dict[str, Any]:
    """A copy of a dataset's config entry with the chosen axis values applied."""
    result = copy.deepcopy(dataset)
    for name, value in chosen.items():
        get_axis(name).apply(result, value)
    return result


def changes_data(chosen: dict[str, Any]) -> bool:
    """Whether these axis values need their own split (a dataset variant)."""
    return any(get_axis(name).data for name in chosen)
