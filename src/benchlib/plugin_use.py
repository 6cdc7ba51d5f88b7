"""Which plugin packages a cell uses, torch-free: the config puts their versions into each cell's
spec (:func:`planned_plugins`, so a new plugin version reruns the cell), ``benchlib run`` checks
them against what is installed (:func:`require_planned_plugins`), and the cell's provenance
names the packages it actually used (:func:`benchlib.provenance.plugins_used`).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

SOURCE = "dataset source"  # registry kinds of the components a store and a split record
PARTITIONER = "partitioner"


def spec_components(spec: Any) -> list[tuple[str, str]]:
    """The registered components cell ``spec`` names, as (registry kind, name): its method,
    model, malfunction and task (declaration and implementation), and the grid axes and readings
    of a variant experiment. (A ``<malfunction>.<parameter>`` axis adds nothing: the cell's own
    malfunction is listed, and another's parameter does not reach its numbers.)"""
    from benchlib.axes import READING_PREFIX

    components = [
        ("method", spec.method),
        ("model", spec.model["name"]),
        ("malfunction", spec.malfunction),
        ("task", spec.task),
        ("task implementation", spec.task),
    ]
    for axis in spec.axes:
        if axis.startswith(READING_PREFIX):
            components.append(("reading", axis.removeprefix(READING_PREFIX)))
        elif "." not in axis:
            components.append(("grid axis", axis))
    return components


def planned_plugins(spec: Any, dataset_source: str, partitioner: str) -> dict[str, str]:
    """Plugin package -> version of every installed plugin whose components cell ``spec`` uses
    (:func:`spec_components`) or whose dataset source and partitioner its config names: part of
    the cell's spec, so a new plugin version reruns the cell; empty for built-ins only."""
    from benchlib import plugins

    components = [*spec_components(spec), (SOURCE, dataset_source), (PARTITIONER, partitioner)]
    return {p["package"]: p["version"] for p in plugins.used_by(components)}


def require_planned_plugins(spec: Any) -> None:
    """Stop with one line when an installed plugin's version differs from the one the cell was
    planned with (``spec.plugins``): its numbers would come from other code than its spec says."""
    from benchlib.errors import BenchlibError

    for package, planned in sorted(spec.plugins.items()):
        try:
            installed = metadata.version(package)
        except metadata.PackageNotFoundError:
            installed = None
        if installed != planned:
            raise BenchlibError(
                f"the cell was planned with plugin {package} {planned}, but "
                f"{installed or 'none'} is installed here; run snakemake again in this "
                "environment (it plans the cell anew) or install the planned version"
            )
