"""Which plugin packages a cell uses, torch-free: the config puts their versions into each cell's
spec (:func:`planned_plugins`, so a new plugin version reruns the cell), ``benchlib run`` checks
them against what is installed (:func:`require_planned_plugins`), and the cell's provenance
names the packages it actually used (:func:`benchlib.facts.provenance.plugins_used`). The components
come from :meth:`benchlib.grid.spec.CellSpec.components`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import metadata

SOURCE = "dataset source"  # registry kinds of the components a store and a split record
PARTITIONER = "partitioner"


def planned_plugins(
    components: Sequence[tuple[str, str]], dataset_source: str, partitioner: str
) -> dict[str, str]:
    """Plugin package -> version of every installed plugin that provides one of a cell's
    ``components`` (registry kind, name) or the dataset source and partitioner its config
    names: part of the cell's spec, so a new plugin version reruns the cell; empty for built-ins
    only."""
    from benchlib.declarations import plugins

    used = [*components, (SOURCE, dataset_source), (PARTITIONER, partitioner)]
    return {p["package"]: p["version"] for p in plugins.used_by(used)}


def require_planned_plugins(planned_versions: Mapping[str, str]) -> None:
    """Stop with one line when an installed plugin's version differs from the one the cell was
    planned with (its spec's ``plugins``): its numbers would come from other code than its spec
    says."""
    from benchlib.primitives.errors import BenchlibError

    for package, planned in sorted(planned_versions.items()):
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
