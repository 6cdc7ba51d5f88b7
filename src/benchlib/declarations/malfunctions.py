"""The malfunctions a config may name: function and parameters, declared once (torch-free).

The functions live in :mod:`benchlib.fl.malfunctions` (torch); this module is what a config
check reads. A plugin declares its own malfunctions with :func:`declare_malfunction`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from benchlib.declarations.params import COUNT, NO_PARAMS, NON_NEGATIVE, Param, Params
from benchlib.declarations.registry import Registry
from benchlib.declarations.settings import Entry


@dataclass(frozen=True)
class MalfunctionDeclaration:
    """A malfunction: its function (``"module:function"``, called as ``function(vector,
    context) -> (sent vector, what was sent)``, see :mod:`benchlib.fl.malfunctions`) and its
    parameters (config: ``datasets.<d>.malfunction.<name>: {...}``)."""

    implementation: str
    params: Params = NO_PARAMS
    description: str = ""


MALFUNCTIONS: Registry[MalfunctionDeclaration] = Registry("malfunction")
NO_MALFUNCTION = "none"  # the malfunction of k = 0 cells, which every malfunction shares


def declare_malfunction(
    name: str,
    implementation: str,
    params: Params | dict[str, Param] | None = None,
    description: str = "",
) -> MalfunctionDeclaration:
    """Declare malfunction ``name`` (for plugins: call it in the entry point's module)."""
    declared = params if isinstance(params, Params) else Params(dict(params or {}))
    return MALFUNCTIONS.add(name, MalfunctionDeclaration(implementation, declared, description))


_BUILT_IN = "benchlib.fl.malfunctions"
declare_malfunction("none", f"{_BUILT_IN}:no_malfunction", description="the model, unchanged")
declare_malfunction(
    "ana",
    f"{_BUILT_IN}:additive_noise",
    {"scale": Param(NON_NEGATIVE, 120.5, "noise scale s in percent (LIGHTYEAR v1)")},
    "additive Gaussian noise on the transmitted model (ANA)",
)
declare_malfunction("sfa", f"{_BUILT_IN}:sign_flip", description="sign flip of the model (SFA)")
declare_malfunction(
    "random", f"{_BUILT_IN}:random_weights", description="a freshly initialised random model"
)
declare_malfunction(
    "dynamic", f"{_BUILT_IN}:dynamic", description="ana, sfa or random, drawn per round and client"
)
PLACEMENTS = ("first", "last", "random")
# A dataset's malfunction section: these, plus one parameter mapping per malfunction.
MALFUNCTION_SETTINGS = Params(
    {
        "placement": Param(
            {"enum": list(PLACEMENTS)},
            "first",
            "which federation clients malfunction: the first k, the last k or k seeded ones",
        ),
        "start_round": Param(
            COUNT,
            0,
            "diagnostic, not a paper setting: rounds 0..start_round-1 are clean",
        ),
    }
)


@dataclass(frozen=True, eq=False)
class MalfunctionSettings(Entry):
    """A dataset's ``malfunction`` section resolved: placement, start_round and the parameters
    of every malfunction it names (defaults filled)."""

    placement: str
    start_round: int
    params: Mapping[str, Mapping[str, Any]]  # malfunction name -> its parameters

    @classmethod
    def from_config(cls, what: str, section: Mapping[str, Any] | None) -> MalfunctionSettings:
        """Check a config's malfunction section; fill the defaults of what it names."""
        section = dict(section or {})
        own = {k: v for k, v in section.items() if k in MALFUNCTION_SETTINGS}
        named = {k: v for k, v in section.items() if k not in MALFUNCTION_SETTINGS}
        settings = MALFUNCTION_SETTINGS.resolve(what, own)
        params = {
            name: MALFUNCTIONS.get(name).params.resolve(f"{what}.{name}", named[name])
            for name in sorted(named)
        }
        return cls(settings["placement"], settings["start_round"], params)

    def for_cell(self, malfunction: str) -> dict[str, Any]:
        """The spec's ``malfunction_params``: placement, start_round, the named malfunctions'
        parameters and the cell's own (its declared defaults when the section omits it)."""
        params = {name: dict(p) for name, p in self.params.items()}
        declared = MALFUNCTIONS.get(malfunction).params
        if declared and malfunction not in params:
            params[malfunction] = declared.defaults()
        return {"placement": self.placement, "start_round": self.start_round, **params}
