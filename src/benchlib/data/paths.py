"""Resolve local input paths named in a config (e.g. a LEAF JSON directory).

A relative path is tried against the current directory (the Snakemake working directory, the user's
project folder) first, then against benchlib's own folder (:mod:`benchlib.primitives.home`), so
``../shared/data/femnist_leaf_sample`` works from the repository root and from any working directory
a test or a cluster job uses.
"""

from __future__ import annotations

from pathlib import Path

from benchlib.primitives.home import resolve_path


def resolve_input_path(path: str | Path, what: str) -> Path:
    """An existing absolute path for ``path``; ``what`` names the setting in error messages."""
    return resolve_path(path, what)
