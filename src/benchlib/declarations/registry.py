"""One registry type for every named thing: methods, datasets, models, malfunctions, tasks,
partitioners and report kinds.

A registry maps names to objects, rejects a second registration under the same name, and answers an
unknown name with one error that names the closest known name, the valid choices and the installed
plugins. ``loader`` (optional) imports the modules whose import registers the built-in entries, the
first time a name is looked up, so that a package's modules are imported only when something needs
them; the installed plugins (:mod:`benchlib.declarations.plugins`) are imported then too.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from benchlib.declarations import plugins
from benchlib.primitives.errors import BenchlibError

T = TypeVar("T")
REGISTRIES: list[Registry] = []  # every registry, in creation order (``benchlib plugins``)


class Registry(Generic[T]):
    """Names -> objects of one kind (e.g. ``Registry[type[Method]]("method")``)."""

    def __init__(self, kind: str, loader: Callable[[], None] | None = None) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._loader = loader
        self._loaded = loader is None
        REGISTRIES.append(self)

    def _load(self) -> None:
        self._load_built_ins()
        plugins.load_plugins()

    def _load_built_ins(self) -> None:
        if not self._loaded:
            self._loaded = True  # set first: the loader's imports register into this registry
            if self._loader is not None:
                with plugins.built_ins():
                    self._loader()

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; a duplicate name is a bug (ValueError). A plugin's
        registration comes after the built-ins (so taking a built-in's name is the plugin's
        error, never the built-in's), and its parameter schemas are checked."""
        if plugins.loading():
            self._load_built_ins()
            check_param_schemas(f"{self.kind} {name!r}", getattr(obj, "params", None))
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self._entries[name] = obj
        plugins.record_registration(self.kind, name)
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
            raise BenchlibError(self.unknown(name))
        return self._entries[name]

    def unknown(self, name: str) -> str:
        """The one-line error for an unknown ``name``: the closest known name, the choices and
        the installed plugins (a plugin that failed to load is named with its error)."""
        close = difflib.get_close_matches(str(name), self.names(), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        broken = plugins.failed()
        if broken:
            tail = "; " + "; ".join(f"plugin {p.name!r} failed to load: {p.error}" for p in broken)
        else:
            tail = f"; {plugins.installed_line()}"
        return f"unknown {self.kind} {name!r}{hint}; choose one of: {', '.join(self.names())}{tail}"

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) pairs sorted by name."""
        return [(name, self._entries[name]) for name in self.names()]


def check_param_schemas(what: str, params: object) -> None:
    """Every declared parameter schema of ``params`` (a
    :class:`~benchlib.declarations.params.Params`) is valid JSON schema: a plugin's broken
    declaration is its error, never a traceback later."""
    from benchlib.declarations.params import Params

    if not isinstance(params, Params):
        return
    import jsonschema

    for key, param in params.items():
        try:
            jsonschema.Draft202012Validator.check_schema(param.json_schema())
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(
                f"{what} declares the parameter {key!r} with an invalid JSON schema ({exc.message})"
            ) from None


def import_object(dotted: str, what: str) -> Any:
    """The object ``"package.module:attribute"`` names (a declaration's implementation)."""
    module_name, _, attribute = dotted.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise BenchlibError(
            f"{what}: cannot import {module_name} ({exc}); is the package that provides it "
            "installed in this environment?"
        ) from exc
    try:
        return getattr(module, attribute)
    except AttributeError as exc:
        raise BenchlibError(f"{what}: {module_name} has no {attribute!r}") from exc


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
