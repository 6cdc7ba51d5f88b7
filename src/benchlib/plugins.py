"""Plugins: components (methods, models, dataset sources, partitioners, malfunctions, report
kinds) that a pip-installed package adds, found through the ``benchlib.plugins`` entry-point group.

A plugin package declares, in its ``pyproject.toml``::

    [project.entry-points."benchlib.plugins"]
    fedavgm = "benchlib_fedavgm.declarations"

The named module is imported the first time any registry is looked up (in Snakemake's parse, in
``benchlib check-config`` and in every ``benchlib run``), so it must be torch-free: it declares
its components (their parameters and the dotted name of their implementation), and the
implementation module is imported only when a cell builds the component. Every registration made
while a plugin's module imports is recorded as that plugin's, so ``benchlib plugins`` can list
who provides what and a cell's provenance can name the plugin packages it used.

A plugin whose module fails to import is kept with its error: :func:`require_loadable` turns it
into one line naming the plugin, its package and the error (checked when a config loads).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata

from benchlib.errors import BenchlibError

GROUP = "benchlib.plugins"
BUILT_IN = "benchlib"


@dataclass
class Plugin:
    """One entry point of the ``benchlib.plugins`` group and what its import registered."""

    name: str
    module: str
    package: str
    version: str
    error: str = ""
    components: list[tuple[str, str]] = field(default_factory=list)  # (kind, name)

    @property
    def label(self) -> str:
        return f"{self.package} {self.version}"


_plugins: list[Plugin] | None = None
_loading: Plugin | None = None
_owners: dict[tuple[str, str], Plugin] = {}


def _entry_points() -> list[metadata.EntryPoint]:
    return sorted(metadata.entry_points(group=GROUP), key=lambda ep: (ep.name, ep.value))


def _package_of(entry_point: metadata.EntryPoint) -> tuple[str, str]:
    dist = entry_point.dist
    if dist is None:
        return "unknown", "unknown"
    return dist.metadata["Name"] or "unknown", dist.version or "unknown"


@contextmanager
def _registering_as(plugin: Plugin) -> Iterator[None]:
    global _loading
    _loading = plugin
    try:
        yield
    finally:
        _loading = None


def load_plugins() -> list[Plugin]:
    """Import every installed plugin once (sorted by entry-point name); later calls return the
    same list. A plugin that fails keeps its error (see :func:`require_loadable`)."""
    global _plugins
    if _plugins is not None:
        return _plugins
    _plugins = []
    for entry_point in _entry_points():
        package, version = _package_of(entry_point)
        plugin = Plugin(entry_point.name, entry_point.module, package, version)
        _plugins.append(plugin)
        with _registering_as(plugin):
            try:
                importlib.import_module(entry_point.module)
            except Exception as exc:  # a broken plugin must not take the error's context away
                last = traceback.extract_tb(exc.__traceback__)[-1:]
                where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
                plugin.error = f"{type(exc).__name__}: {exc}{where}"
    return _plugins


def record_registration(kind: str, name: str) -> None:
    """Called by every registry on ``add``: remembers which plugin (if any) is registering."""
    if _loading is not None:
        _loading.components.append((kind, name))
        _owners[(kind, name)] = _loading


def owner(kind: str, name: str) -> Plugin | None:
    """The plugin that registered ``kind`` ``name``, or None for a built-in."""
    return _owners.get((kind, name))


def origin(kind: str, name: str) -> str:
    """``"benchlib 0.1.0"`` for a built-in, ``"<package> <version>"`` for a plugin's component."""
    plugin = owner(kind, name)
    if plugin is not None:
        return plugin.label
    import benchlib

    return f"{BUILT_IN} {benchlib.__version__}"


def failed() -> list[Plugin]:
    """The installed plugins whose module failed to import."""
    return [plugin for plugin in load_plugins() if plugin.error]


def require_loadable() -> None:
    """Stop with one line per the first broken plugin: its name, package and error."""
    broken = failed()
    if broken:
        plugin = broken[0]
        more = f" (and {len(broken) - 1} more broken plugins)" if len(broken) > 1 else ""
        raise BenchlibError(
            f"plugin {plugin.name!r} ({plugin.label}, module {plugin.module}) failed to load: "
            f"{plugin.error}{more}; fix the package or uninstall it "
            f"(pip uninstall {plugin.package})"
        )


def installed_line() -> str:
    """``installed plugins: fedavgm (benchlib-fedavgm 0.1.0)`` or ``no plugins installed``."""
    plugins = load_plugins()
    if not plugins:
        return "no plugins installed"
    return "installed plugins: " + ", ".join(f"{p.name} ({p.label})" for p in plugins)


def used_by(components: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    """The plugin packages (sorted, each once) that provide any of ``components``."""
    packages = {
        (plugin.package, plugin.version)
        for kind, name in components
        if (plugin := owner(kind, name)) is not None
    }
    return [{"package": package, "version": version} for package, version in sorted(packages)]
