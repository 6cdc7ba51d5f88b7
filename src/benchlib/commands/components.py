"""`benchlib plugins`: every registered component, built-in or a plugin's, with who provides it.

Torch-free: it imports the declaration modules only (the registries a config names from).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from benchlib.declarations import plugins
from benchlib.declarations.registry import REGISTRIES, Registry

HELP = (
    "list every component a config may name (methods, models, dataset sources, partitioners, "
    "malfunctions, report kinds, tasks, grid axes, readings), built-in or from an installed "
    "plugin, with its package and version"
)
# The modules whose import creates the registries a config names components from.
DECLARING_MODULES = (
    "benchlib.methods.catalog",
    "benchlib.models.catalog",
    "benchlib.data.registry",
    "benchlib.data.partition",
    "benchlib.declarations.malfunctions",
    "benchlib.report.base",
    "benchlib.tasks.catalog",
    "benchlib.grid.axes",
    "benchlib.grid.readings",
)
LISTED_KINDS = (
    "method",
    "model",
    "dataset source",
    "partitioner",
    "malfunction",
    "report kind",
    "task",
    "grid axis",
    "reading",
)


def component_registries() -> list[Registry]:
    """The registries of every component kind a config may name, in :data:`LISTED_KINDS` order."""
    for module in DECLARING_MODULES:
        importlib.import_module(module)
    by_kind = {registry.kind: registry for registry in REGISTRIES}
    return [by_kind[kind] for kind in LISTED_KINDS]


def component_rows() -> list[tuple[str, str, str]]:
    """(kind, name, provided by) for every registered component."""
    return [
        (registry.kind, name, plugins.origin(registry.kind, name))
        for registry in component_registries()
        for name in registry.names()
    ]


def cmd_plugins(args: argparse.Namespace) -> None:
    rows = [
        row
        for row in component_rows()
        if not (args.plugins_only and plugins.owner(row[0], row[1]) is None)
    ]
    print(plugins.installed_line())
    for plugin in plugins.load_plugins():
        if plugin.error:
            print(f"  BROKEN {plugin.name} ({plugin.label}): {plugin.error}")
    width = max((len(f"{kind} {name}") for kind, name, _ in rows), default=0)
    for kind, name, origin in rows:
        print(f"{f'{kind} {name}':<{width}}  {origin}")
    if plugins.failed():
        sys.exit(1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugins-only", action="store_true", help="list only the plugins' components"
    )
