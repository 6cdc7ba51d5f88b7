"""The target list of a config: one function that rule ``all`` and ``benchlib targets`` share.

Every report (:mod:`benchlib.report.base`) is a target: ``tables/<name>.tex`` for a table,
``figures/<name>.pdf`` and ``figures/<name>.png`` for a figure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchlib.config import Config


def all_targets(config: Config) -> list[str]:
    """Every table and figure file of ``config``, in report order."""
    return [target for report in config.reports.values() for target in report.targets]


def report_names(config: Config, output: str) -> list[str]:
    """Names of the config's reports of one output kind (``table`` or ``figure``)."""
    return [name for name, report in config.reports.items() if report.output == output]
