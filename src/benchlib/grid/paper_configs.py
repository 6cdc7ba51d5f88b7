"""The default config: the papers' grids (``config/paper/*.yaml``, one file per paper) merged.

Snakemake uses it when it gets no ``--configfile``, so every paper table and figure resolves by
name (``snakemake -n tables/femnist_ana.tex``); ``benchlib targets`` lists its targets. Each paper
file is itself a standalone, complete config (usable with ``--configfile``); demo, smoke and
sample configs are separate files that never inherit the paper grids.

Merging: the named sections (datasets, methods, experiments, reports) are unions by id; the same
id in two files must have the same definition (a shared baseline such as ``fedavg``), otherwise
merging fails with one error naming both files. Descriptions are joined.

Your methods on the paper grids: a config with ``paper_grids: true`` is laid over the paper grids
(:func:`with_paper_grids`: its mappings merged key by key into the grids', its other values
replacing theirs), and ``add_methods: {METHOD_ID: all | [EXPERIMENT, ...]}`` appends method ids
to the experiments' method lists (:func:`with_added_methods`): every paper target then gets the
method's row, and only the method's cells are new.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.primitives.errors import BenchlibError, require

PAPER_DIR = Path("config") / "paper"
SECTIONS = ("datasets", "methods", "experiments", "reports")
PAPER_GRIDS = "paper_grids"  # config key: lay this config over the paper grids
ADD_METHODS = "add_methods"  # config key: method id -> "all" or experiment ids
ALL = "all"


def paper_files(folder: str | Path) -> list[Path]:
    """The paper config files of ``folder`` (``*.yaml``, sorted by name)."""
    folder = Path(folder)
    require(
        folder.is_dir(),
        f"paper config folder {folder} not found; run from the benchlib checkout or pass a config",
    )
    files = sorted(folder.glob("*.yaml"))
    require(bool(files), f"paper config folder {folder} has no *.yaml file; add one per paper")
    return files


def merge_configs(named: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Merge raw configs [(file name, config)]; conflicting ids are one clear error."""
    merged: dict[str, Any] = {}
    owner: dict[tuple[str, str], str] = {}
    descriptions = []
    for source, raw in named:
        for key, value in raw.items():
            if key == "description":
                descriptions.append(str(value))
            elif key in SECTIONS or isinstance(value, dict):
                require(
                    isinstance(value, dict),
                    f"{source}: {key} must be a mapping of ids to definitions",
                )
                section = merged.setdefault(key, {})
                for ident, definition in value.items():
                    first = owner.setdefault((key, ident), source)
                    if ident in section and section[ident] != definition:
                        raise BenchlibError(
                            f"{first} and {source} both define {key}.{ident}, differently; "
                            "give one of them another id or make both definitions equal"
                        )
                    section[ident] = definition
            else:
                first = owner.setdefault((key, ""), source)
                if key in merged and merged[key] != value:
                    raise BenchlibError(
                        f"{first} and {source} set {key} differently; make them equal"
                    )
                merged[key] = value
    if descriptions:
        merged["description"] = "; ".join(descriptions)
    return merged


def paper_dir() -> Path:
    """benchlib's own paper config folder (:func:`benchlib.primitives.home.benchlib_dir`), wherever
    the workflow or the command runs."""
    from benchlib.primitives.home import benchlib_dir

    return benchlib_dir() / PAPER_DIR


def load_paper_config(folder: str | Path | None = None) -> dict[str, Any]:
    """The merged raw config of every paper file in ``folder`` (default: benchlib's own)."""
    from benchlib.primitives.yaml_load import load_config_file

    folder = paper_dir() if folder is None else folder
    return merge_configs([(str(path), load_config_file(path)) for path in paper_files(folder)])


def load_raw_config(path: str | Path | None = None) -> dict[str, Any]:
    """A raw config from a file (laid over the paper grids if it says ``paper_grids: true``),
    or the merged paper configs of a folder (default: benchlib's own ``config/paper``)."""
    from benchlib.primitives.yaml_load import load_config_file

    if path is None:
        return load_paper_config()
    path = Path(path)
    return load_paper_config(path) if path.is_dir() else with_paper_grids(load_config_file(path))


def wants_paper_grids(config: dict[str, Any], configfile_given: bool) -> bool:
    """Whether the workflow builds on the paper grids: ``paper_grids`` when the config sets it;
    otherwise when no ``--configfile`` was given and the config has no ``experiments`` (a
    config with experiments is standalone)."""
    if PAPER_GRIDS in config:
        return bool(config[PAPER_GRIDS])
    return not configfile_given and "experiments" not in config


def _laid_over(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """``top`` over ``base``: mappings merged key by key, any other value replaced."""
    merged = dict(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _laid_over(merged[key], value)
        else:
            merged[key] = value
    return merged


def with_paper_grids(raw: dict[str, Any], force: bool = False) -> dict[str, Any]:
    """``raw`` laid over benchlib's paper grids when it sets ``paper_grids: true`` (or
    ``force``); otherwise ``raw`` unchanged. The result says ``paper_grids: true``."""
    if not (force or raw.get(PAPER_GRIDS)):
        return raw
    return _laid_over(load_paper_config(), {**raw, PAPER_GRIDS: True})


def with_added_methods(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with each ``add_methods`` entry's method id appended to the method lists of the
    experiments it names (``all``: every experiment); unchanged without ``add_methods``. A
    method id not under ``methods`` or an experiment not under ``experiments`` is one error."""
    import difflib

    added = raw.get(ADD_METHODS) or {}
    if not added:
        return raw
    experiments = {name: dict(entry) for name, entry in raw["experiments"].items()}
    for method_id, where in added.items():
        require(
            method_id in raw["methods"],
            f"config error at {ADD_METHODS}.{method_id}: method {method_id!r} is not defined "
            "under methods; define it there (method, label, params)",
        )
        names = list(experiments) if where == ALL else list(where)
        for name in names:
            if name not in experiments:
                close = difflib.get_close_matches(name, list(experiments), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise BenchlibError(
                    f"config error at {ADD_METHODS}.{method_id}: experiment {name!r} is not "
                    f"defined{hint}; name experiments of the config or write {ALL}"
                )
            methods = list(experiments[name]["methods"])  # a fresh list: YAML aliases share one
            if method_id not in methods:
                experiments[name]["methods"] = [*methods, method_id]
    return {**raw, "experiments": experiments}


def added_methods(raw: dict[str, Any], experiment: str) -> list[str]:
    """The method ids that ``add_methods`` put into ``experiment`` (a file's experiment id, the
    ``base`` of a grid variant): the rows that are not the paper's."""
    added = raw.get(ADD_METHODS) or {}
    return [m for m, where in added.items() if where == ALL or experiment in where]
