"""``fedagain_bars``: FedAgain Figures 8, 9 and 10, bar charts (mean +- std): one panel per
metric, the groups along x, one bar per method. The statistic, groups and config entry are
described in :mod:`benchlib.report.kinds.fedagain.groups`."""

from __future__ import annotations

from benchlib.report.base import register_kind
from benchlib.report.kinds.fedagain.groups import FedAgainGroups


@register_kind
class FedAgainBars(FedAgainGroups):
    name = "fedagain_bars"
    style = "bars"
