"""``fedagain_box``: FedAgain Figure 11, box plots: one panel per metric, the groups along x, one
box per method. The statistic, groups and config entry are described in
:mod:`benchlib.report.kinds.fedagain.groups`."""

from __future__ import annotations

from benchlib.report.base import register_kind
from benchlib.report.kinds.fedagain.groups import FedAgainGroups


@register_kind
class FedAgainBox(FedAgainGroups):
    name = "fedagain_box"
    style = "box"
