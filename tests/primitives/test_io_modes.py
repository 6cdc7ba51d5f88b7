"""Atomically written files and folders get the modes the umask gives any other file, so a
second user can read a prepared store or a results folder (mkstemp alone makes them 0600)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from benchlib.primitives.io import (
    atomic_directory,
    current_umask,
    write_json_atomic,
    write_text_atomic,
)


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_current_umask_reads_without_changing_it(umask):
    assert current_umask() == umask
    assert current_umask() == umask


def test_atomic_files_and_directories_follow_the_umask(umask, tmp_path):
    write_text_atomic(tmp_path / "a.txt", "x")
    write_json_atomic(tmp_path / "m.json", {"a": 1})
    with atomic_directory(tmp_path / "store") as tmp:
        write_json_atomic(tmp / "manifest.json", {})
    expected = {0o022: (0o644, 0o755), 0o002: (0o664, 0o775), 0o077: (0o600, 0o700)}[umask]
    assert mode(tmp_path / "a.txt") == mode(tmp_path / "m.json") == expected[0]
    assert mode(tmp_path / "store") == expected[1]
    assert mode(tmp_path / "store" / "manifest.json") == expected[0]


def test_every_file_of_a_prepared_store_is_readable_by_others(tmp_path):
    """The real mnist5k prepare under umask 022: a second user can read every file."""
    from benchlib.data.registry import get_dataset

    old = os.umask(0o022)
    try:
        get_dataset("mnist5k").prepare(tmp_path / "mnist5k", {})
    finally:
        os.umask(old)
    store = tmp_path / "mnist5k"
    assert mode(store) == 0o755
    modes = {p.name: mode(p) for p in store.iterdir()}
    assert modes == dict.fromkeys(["index.csv", "manifest.json", "pixels.npy"], 0o644)
