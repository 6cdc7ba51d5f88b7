"""The default config: the papers' grids (``config/paper/*.yaml``, one file per paper) merged.

Snakemake uses it when it gets no ``--configfile``, so every paper table and figure resolves by
name (``snakemake -n tables/femnist_ana.tex``); ``benchlib targets`` lists its targets. Each paper
file is itself a standalone, complete config (usable with ``--configfile``); demo, smoke and
sample configs are separate files that never inherit the paper grids.

Merging: the named sections (datasets, methods, experiments, reports) are unions by id; the same
id in two files must have the same definition (a shared baseline such as ``fedavg``), otherwise
merging fails with one error naming both files. Descriptions are joined.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchlib.errors import BenchlibError, require

PAPER_DIR = Path("config") / "paper"
SECTIONS = ("datasets", "methods", "experiments", "reports")


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


def load_paper_config(folder: str | Path = PAPER_DIR) -> dict[str, Any]:
    """The merged raw config of every paper file in ``folder``."""
    from benchlib.config import load_config_file

    return merge_configs([(str(path), load_config_file(path)) for path in paper_files(folder)])


def load_raw_config(path: str | Path | None = None) -> dict[str, Any]:
    """A raw config from a file, or the merged paper configs of a folder (default
    ``config/paper``)."""
    from benchlib.config import load_config_file

    path = Path(PAPER_DIR if path is None else path)
    return load_paper_config(path) if path.is_dir() else load_config_file(path)
