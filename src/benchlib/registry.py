"""One registry type for every named thing: methods, datasets, models, malfunctions, tasks,
partitioners and report kinds.

A registry maps names to objects, rejects a second registration under the same name, and answers
an unknown name with one error that lists the valid choices. ``loader`` (optional) imports the
modules whose import registers the entries, the first time a name is looked up, so that a
package's modules are imported only when something needs them.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from benchlib.errors import BenchlibError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> objects of one kind (e.g. ``Registry[type[Method]]("method")``)."""

    def __init__(self, kind: str, loader: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._loader = loader
        self._loaded = loader is None

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True  # set first: the loader's imports register into this registry
            assert self._loader is not None
            self._loader()

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; a duplicate name is a bug (ValueError)."""
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = obj
        return obj

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator form of :meth:`add`."""

        def decorate(obj: T) -> T:
            return self.add(name, obj)

        return decorate

    def names(self) -> list[str]:
        """Sorted registered names."""
        self._load()
        return sorted(self._entries)

    def get(self, name: str) -> T:
        """The entry ``name``, or a clear error listing the choices."""
        self._load()
        if name not in self._entries:
            raise BenchlibError(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}"
            )
        return self._entries[name]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) pairs sorted by name."""
        return [(name, self._entries[name]) for name in self.names()]


def import_submodules(package: str, skip: tuple[str, ...] = ()) -> Callable[[], None]:
    """A loader that imports every module of ``package`` and of its subpackages (sorted by dotted
    name) except the modules named in ``skip`` (relative to ``package``)."""

    def load() -> None:
        module = importlib.import_module(package)
        found = pkgutil.walk_packages(module.__path__, prefix=f"{package}.")
        for name in sorted(info.name for info in found):
            if name.removeprefix(f"{package}.") not in skip:
                importlib.import_module(name)

    return load
