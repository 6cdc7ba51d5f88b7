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
into one line naming the plugin, its package and the error (checked when a config loads). Any
failure counts, ``sys.exit`` and argument parsing at import included (the module sees only its
own name in ``sys.argv``, and what it prints while importing is kept for the error); only
Ctrl-C (KeyboardInterrupt) goes through.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import sysconfig
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata

from benchlib.primitives.errors import BenchlibError

GROUP = "benchlib.plugins"
BUILT_IN = "benchlib"


@dataclass
class Plugin:
    """One entry point of the ``benchlib.declarations.plugins`` group and what its import
    registered."""

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
            plugin.error = _import_plugin_module(entry_point.module)
    return _plugins


def loading() -> bool:
    """Whether a plugin's module is being imported now (its registrations are its own)."""
    return _loading is not None


def _import_plugin_module(module: str) -> str:
    """Import a plugin's module; "" or its error in words. A plugin module must not end the
    process, parse benchlib's command line or print benchlib's usage: while it imports,
    ``sys.argv`` holds only its name and its output is held back (printed when it loads, quoted
    in the error when it fails)."""
    printed = io.StringIO()
    argv = sys.argv
    sys.argv = [module]
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            importlib.import_module(module)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # SystemExit too: a broken plugin never ends benchlib silently
        sys.modules.pop(module, None)
        return _describe(exc, printed.getvalue())
    finally:
        sys.argv = argv
    if printed.getvalue():
        sys.stderr.write(printed.getvalue())
    return ""


def _describe(exc: BaseException, printed: str) -> str:
    """One line: the exception, where it was raised, and the last line the plugin printed."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = (
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        sysconfig.get_paths()["stdlib"],
    )
    theirs = [f for f in frames if not f.filename.startswith(own)]  # the plugin's own line
    last = (theirs or frames)[-1:]
    where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
    if isinstance(exc, SystemExit):
        text = f"it called sys.exit({exc.code!r}) while importing{where}"
    else:
        text = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}{where}"
    said = [line.strip() for line in printed.splitlines() if line.strip()]
    return f"{text}; it printed {said[-1]!r}" if said else text


@contextlib.contextmanager
def built_ins() -> Iterator[None]:
    """Registrations made inside are benchlib's own, also while a plugin imports (a registry's
    built-ins loaded because the plugin looked a name up)."""
    global _loading
    saved, _loading = _loading, None
    try:
        yield
    finally:
        _loading = saved


def _from_benchlib_module() -> bool:
    """Whether the module whose import makes the current registration is one of benchlib's (a
    built-in catalog the plugin's import pulled in), judged by the innermost module body on the
    stack: a plugin's declarations are its own module's, or a function that one calls."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "<module>":
            return frame.f_globals.get("__name__", "").split(".")[0] == "benchlib"
        frame = frame.f_back
    return False


def record_registration(kind: str, name: str) -> None:
    """Called by every registry on ``add``: remembers which plugin (if any) is registering."""
    if _loading is not None and not _from_benchlib_module():
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
