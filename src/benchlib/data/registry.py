"""Dataset source registry: name -> how to prepare it into the store, and what it contains.

Each module in :mod:`benchlib.data.sources` registers its sources on import; this module imports
them all, so adding a dataset means adding one module there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib.declarations.params import NO_PARAMS, Params
from benchlib.declarations.registry import Registry, import_submodules
from benchlib.primitives.errors import BenchlibError


@dataclass(frozen=True)
class DatasetSource:
    """How to obtain one dataset and what it looks like.

    ``params`` declares the dataset's config ``params`` (paths, URLs, checksums, sizes...; a
    source that downloads includes :func:`benchlib.data.download.download_params` of its files).
    ``build(out_dir, params)`` writes a prepared store (see :mod:`benchlib.data.store`) from
    complete params (every default filled; plus ``task``, the dataset's task); call it through
    :meth:`prepare`, which checks and fills them. A bring-your-own
    source (credentialed or private data) sets ``access_page``: its files come from the user
    through ``params.path``, and a missing copy stops its prepare job (never the workflow's
    parse) with one error naming the config key and the page where access is granted.
    ``prepare_resources`` (SLURM ``mem_mb``, ``runtime`` minutes, ``cpus_per_task``) marks a
    prepare step heavy enough (multi-GB archives) to run as a cluster job instead of on the
    submitting host (workflow/rules/resources.smk).
    """

    name: str
    build: Callable[[Path, dict[str, Any]], None]
    num_classes: int
    image_shape: tuple[int, ...]
    task: str = "classification"
    description: str = ""
    params: Params = NO_PARAMS
    access_page: str = ""
    prepare_resources: dict[str, int] = field(default_factory=dict)

    def resolve(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """The dataset's ``params`` checked against the declaration, defaults filled."""
        return self.params.resolve(f"source {self.name!r} params", params)

    def prepare(
        self, out_dir: Path, params: Mapping[str, Any] | None, task: str = "classification"
    ) -> None:
        """Write the prepared store of this source into ``out_dir``, its manifest naming this
        source (for the provenance of the cells that read it)."""
        from benchlib.data.store import record_source

        self.build(Path(out_dir), {**self.resolve(params), "task": task})
        record_source(out_dir, self.name)


def check_local_copy(source: DatasetSource, dataset: str, params: dict[str, Any]) -> None:
    """For a bring-your-own source: the user's local copy (``params.path``) must exist."""
    if not source.access_page:
        return
    path = params.get("path")
    if path and Path(path).expanduser().exists():
        return
    where = f"{path!r} does not exist" if path else "params.path is not set"
    raise BenchlibError(
        f"dataset {dataset} ({source.name}) is bring-your-own data and {where}: request access "
        f"at {source.access_page}, download it, then set datasets.{dataset}.params.path to your "
        "local copy"
    )


_SOURCES: Registry[DatasetSource] = Registry(
    "dataset source", loader=import_submodules("benchlib.data.sources")
)


def register_dataset(source: DatasetSource) -> DatasetSource:
    """Add a dataset source to the registry (module import time)."""
    return _SOURCES.add(source.name, source)


def dataset_names() -> list[str]:
    """Sorted names of all registered dataset sources."""
    return _SOURCES.names()


def get_dataset(name: str) -> DatasetSource:
    """Look up a dataset source by name, with a clear error for unknown names."""
    return _SOURCES.get(name)
