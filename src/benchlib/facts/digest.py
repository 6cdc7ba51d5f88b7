"""Digests of a grid's numbers: publish one, and check any results folder against it.

A digest file holds one sha256 per cell over the cell's numbers in metrics.json (per-client test
metrics and sizes, the per-round history - validation metrics, selections, scores, malfunction
schedule -, the malfunctioning clients and the method summary), plus the provenance of the run
that made it. ``benchlib digest`` writes one; ``benchlib verify`` compares a finished run with one
and names the cells that differ and the provenance fields (torch version, CPU kernels...) that
differ from the reference. Torch-free.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.grid.spec import Cell
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.io import loads_json, write_json_atomic

FORMAT = 1
NUMBER_KEYS = ("clients", "held_out_clients", "history", "malicious_clients", "method_summary")
# Provenance fields that can change the numbers (the commit is reported, never compared: a new
# commit that leaves the numbers alone still matches).
COMPARED_PROVENANCE = (
    "benchlib",
    "python",
    "torch",
    "torchvision",
    "numpy",
    "cuda",
    "cudnn",
    "device",
    "threads",
    "cpu_kernels.setting",
    "cpu_kernels.aten",
    "cpu_kernels.onednn",
    "cpu_kernels.portable",
)


def cell_key(metrics: Mapping[str, Any]) -> str:
    """``experiment/malfunction/method/kK/seedS`` (+ ``/axis=value`` for grid-axis variants)."""
    try:
        cell = metrics["cell"]
        key = Cell(
            cell["experiment"], cell["malfunction"], cell["method_id"], cell["k"], cell["seed"]
        ).id
    except (KeyError, TypeError) as exc:
        raise BenchlibError(f"metrics.json lacks the cell summary ({exc}); rerun the cell") from exc
    axes = sorted((name, value) for name, value in cell.items() if name.startswith("axis_"))
    return key + "".join(f"/{name[5:]}={value}" for name, value in axes)


def numbers_digest(metrics: Mapping[str, Any]) -> str:
    """sha256 over the cell's numbers in canonical JSON (sorted keys, shortest float repr)."""
    numbers = {key: metrics[key] for key in NUMBER_KEYS if key in metrics}
    if "clients" not in numbers:
        raise BenchlibError("metrics.json has no per-client results; rerun the cell")
    as_read = json.loads(json.dumps(numbers))  # as metrics.json reads back: int keys -> str
    text = json.dumps(as_read, sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()


def flat_provenance(provenance: Mapping[str, Any]) -> dict[str, Any]:
    """Nested provenance as ``{"cpu_kernels.aten": ...}``."""
    flat: dict[str, Any] = {}
    for key, value in provenance.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}.{sub}": inner for sub, inner in flat_provenance(value).items()})
        else:
            flat[key] = value
    return flat


@dataclass
class Run:
    """The cells of a results folder: digest and flat provenance per cell key."""

    digests: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)


def read_run(paths: Iterable[Path]) -> Run:
    """Every metrics.json under ``paths`` (files or folders, searched recursively)."""
    run = Run()
    files: list[Path] = []
    for path in paths:
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(sorted(path.rglob("metrics.json")))
        else:
            raise BenchlibError(f"{path} does not exist; pass a results folder or metrics.json")
    for file in files:
        try:
            metrics = loads_json(file.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise BenchlibError(f"{file} is not readable JSON ({exc}); rerun its cell") from exc
        key = cell_key(metrics)
        if key in run.digests:
            raise BenchlibError(f"cell {key} appears twice (second: {file}); pass one run folder")
        run.digests[key] = numbers_digest(metrics)
        run.provenance[key] = flat_provenance(metrics.get("provenance", {}))
    return run


def common_provenance(run: Run) -> dict[str, Any]:
    """The provenance fields every cell shares (a field that varies is listed as such)."""
    fields: dict[str, set[str]] = {}
    values: dict[str, Any] = {}
    for provenance in run.provenance.values():
        for key, value in provenance.items():
            fields.setdefault(key, set()).add(json.dumps(value, sort_keys=True))
            values[key] = value
    return {key: values[key] if len(seen) == 1 else "varies" for key, seen in fields.items()}


def write_digest(run: Run, out: Path, description: str) -> None:
    """The digest file of ``run`` (sorted, so the same run gives the same bytes)."""
    if not run.digests:
        raise BenchlibError("no metrics.json found; pass the folder of a finished run")
    write_json_atomic(
        out,
        {
            "format": FORMAT,
            "description": description,
            "cells": dict(sorted(run.digests.items())),
            "provenance": common_provenance(run),
        },
    )


def read_digest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise BenchlibError(f"digest file {path} not found; write one with `benchlib digest`")
    try:
        digest = loads_json(path.read_text())
    except json.JSONDecodeError as exc:
        raise BenchlibError(f"digest file {path} is not valid JSON ({exc.msg})") from exc
    if not isinstance(digest, dict) or digest.get("format") != FORMAT or "cells" not in digest:
        raise BenchlibError(f"{path} is not a benchlib digest (format {FORMAT}); regenerate it")
    return digest


@dataclass
class Comparison:
    """A run against a reference digest."""

    matching: list[str]
    differing: list[str]
    missing: list[str]  # in the reference, not in the run
    extra: list[str]  # in the run, not in the reference
    provenance_changes: dict[str, tuple[Any, Any]]  # field -> (run, reference)

    @property
    def all_match(self) -> bool:
        return not self.differing and not self.missing

    def summary_line(self) -> str:
        total = len(self.matching) + len(self.differing) + len(self.missing)
        line = f"{len(self.matching)} of {total} cells match the reference numbers"
        if self.all_match:
            return line
        parts = []
        if self.differing:
            parts.append(f"{len(self.differing)} differ")
        if self.missing:
            parts.append(f"{len(self.missing)} not run")
        return f"{line} ({', '.join(parts)})"

    def details(self, limit: int = 20) -> list[str]:
        lines = []
        for label, keys in (("differs", self.differing), ("not run", self.missing)):
            lines += [f"  {label}: {key}" for key in keys[:limit]]
            if len(keys) > limit:
                lines.append(f"  ... and {len(keys) - limit} more ({label})")
        if self.extra:
            lines.append(f"  {len(self.extra)} cells of the run are not in the reference")
        if not self.all_match:
            if self.provenance_changes:
                lines.append("  provenance that differs from the reference (run vs reference):")
                lines += [
                    f"    {name}: {ours} vs {theirs}"
                    for name, (ours, theirs) in sorted(self.provenance_changes.items())
                ]
            else:
                lines.append("  no compared provenance field differs from the reference")
        return lines


def compare(run: Run, digest: Mapping[str, Any]) -> Comparison:
    """Cell by cell, and the compared provenance fields of the run against the reference's."""
    reference: Mapping[str, str] = digest["cells"]
    matching = sorted(key for key in reference if run.digests.get(key) == reference[key])
    differing = sorted(key for key in reference if key in run.digests and key not in matching)
    missing = sorted(key for key in reference if key not in run.digests)
    extra = sorted(key for key in run.digests if key not in reference)
    ours = common_provenance(
        Run(
            {k: v for k, v in run.digests.items() if k in reference},
            {k: v for k, v in run.provenance.items() if k in reference},
        )
    )
    theirs = digest.get("provenance", {})
    changes = {
        name: (ours.get(name, "unrecorded"), theirs.get(name, "unrecorded"))
        for name in COMPARED_PROVENANCE
        if ours.get(name, "unrecorded") != theirs.get(name, "unrecorded")
    }
    return Comparison(matching, differing, missing, extra, changes)
