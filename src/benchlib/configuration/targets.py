"""The target list of a config: one function that rule ``all`` and ``benchlib targets`` share.

Every report (:mod:`benchlib.report.base`) is a target: ``tables/<name>.tex`` for a table,
``figures/<name>.pdf`` and ``figures/<name>.png`` for a figure.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from benchlib.primitives import layout

RESULT_PREFIXES = (f"{layout.RESULTS}/", f"./{layout.RESULTS}/")
REPORT_FOLDERS = tuple(f"{folder}/" for folder in (layout.TABLES, layout.FIGURES, layout.REPORTS))

if TYPE_CHECKING:
    from benchlib.configuration.config import Config


def all_targets(config: Config) -> list[str]:
    """Every table and figure file of ``config``, in report order."""
    return [target for report in config.reports.values() for target in report.targets]


def report_names(config: Config, output: str) -> list[str]:
    """Names of the config's reports of one output kind (``table``, ``figure``, ...)."""
    return [name for name, report in config.reports.items() if report.output == output]


AGGREGATE_KINDS = {
    "table": "tables",
    "figure": "figures",
    "figure_numbers": "figures",
    "markdown": "reports",
    "markdown_numbers": "reports",
}
PAPERS = ("lightyear", "fedagain", "tfl")


def aggregate_targets(config: Config, paper_index: dict[str, str]) -> dict[str, list[str]]:
    """The aggregate targets: ``<paper>_tables``, ``<paper>_figures``, ``<paper>_reports`` and
    ``<paper>_all`` (every target of the paper) for the three papers, each listing the config's
    targets of that paper (empty when the config has none); ``paper_index`` as
    :func:`benchlib.report.browse.paper_index`."""
    from benchlib.report.browse import report_paper

    aggregates: dict[str, list[str]] = {
        f"{paper}_{group}": [] for paper in PAPERS for group in (*AGGREGATE_KINDS.values(), "all")
    }
    for report in config.reports.values():
        paper = report_paper(report, config, paper_index).lower()
        if paper not in PAPERS:
            continue
        aggregates[f"{paper}_{AGGREGATE_KINDS[report.output]}"] += report.targets
        aggregates[f"{paper}_all"] += report.targets
    return aggregates


def requested_targets() -> list[str]:
    """The targets of the running ``snakemake`` command, read while it parses the Snakefile.

    Snakemake parses the workflow while it builds its DAG API object, whose ``dag_settings``
    (with the command's targets) are already set but not yet handed to the workflow; this finds
    that object on the call stack. Empty when there is none (another Snakemake version, the
    Python API without targets)."""
    frame = sys._getframe(1)
    while frame is not None:
        settings = getattr(frame.f_locals.get("self"), "dag_settings", None)
        targets = getattr(settings, "targets", None)
        if targets is not None:
            return sorted(str(t) for t in targets)
        frame = frame.f_back
    return []


def config_file_targets(targets: list[str]) -> list[str]:
    """Targets that look like config files (the ``--configfile X TARGET`` trap the other way
    round: ``snakemake config/demo.yaml`` asks to build the config): YAML files, and JSON files
    outside ``results/`` (the workflow's own JSON outputs, e.g. a cell's metrics.json, are
    targets)."""
    return [
        t
        for t in targets
        if t.endswith((".yaml", ".yml"))
        or (
            t.endswith(".json") and not t.startswith((f"{layout.RESULTS}/", f"./{layout.RESULTS}/"))
        )
    ]


def unknown_report_target(requested: list[str], config: Config) -> str | None:
    """One line for the first requested table, figure or report file that ``config`` does not
    build (instead of Snakemake's MissingRuleException): why, and which of benchlib's configs
    builds it and how to ask for it. None when every requested report target is the config's."""
    known = set(all_targets(config))
    for target in requested:
        name = target.removeprefix("./")
        if name.startswith(REPORT_FOLDERS) and name not in known:
            return (
                f"{name} is not a target of this config (benchlib targets CONFIG lists its "
                f"targets); {builder_hint(name)}"
            )
    return None


def builder_hint(target: str) -> str:
    """Which of benchlib's own configs builds ``target``, and how to build it from here."""
    from benchlib.configuration.config import Config, load_config_file
    from benchlib.grid.paper_configs import PAPER_DIR, paper_files
    from benchlib.primitives.errors import BenchlibError
    from benchlib.primitives.home import benchlib_dir

    home = benchlib_dir()
    for path in paper_files(home / PAPER_DIR):
        try:
            if target in all_targets(Config(load_config_file(path))):
                return (
                    f"it is a paper target ({path.relative_to(home)}): set paper_grids: true in "
                    "your config to build it on the paper grids (your entries override theirs; "
                    "add_methods adds your methods)"
                )
        except BenchlibError:
            continue
    for path in sorted((home / "config").glob("*.yaml")):
        try:
            if target in all_targets(Config(load_config_file(path))):
                return f"{path.relative_to(home)} builds it: --configfile={path}"
        except BenchlibError:
            continue
    return "no config of benchlib builds it; check the name"
