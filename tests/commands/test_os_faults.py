"""File-system faults (full disk, read-only folder, no permission) end every subcommand with one
line ``error: ...`` and exit status 2, and leave no partial output. The faults are injected
where the bytes are written (the tests run as any user, on any file system)."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchlib.commands.cli import main
from benchlib.primitives import io


def write_metrics(path: Path) -> Path:
    cell = {"experiment": "e", "dataset": "d", "malfunction": "none", "method_id": "m",
            "method": "m", "k": 0, "seed": 0}  # fmt: skip
    clients = [{"client": 0, "malicious": False, "test_accuracy": 0.5, "n_train": 1, "n_val": 1,
                "n_test": 1}]  # fmt: skip
    path.write_text(json.dumps({"cell": cell, "clients": clients, "history": {}}))
    return path


def fail_with(code: int):
    def raise_fault(self, path, *args, **kwargs):
        Path(path).write_text("partial")  # a write that got part of the way
        raise OSError(code, os.strerror(code), str(path))

    return raise_fault


@pytest.mark.parametrize(
    "code, phrase",
    [
        (errno.ENOSPC, "no space left on the device of {out} ("),
        (errno.EROFS, "{out} is on a read-only file system; run from (or write the outputs"),
        (errno.EACCES, "permission denied: {out}; fix its permissions or write elsewhere"),
    ],
)
def test_a_file_system_fault_is_one_error_line(tmp_path, monkeypatch, capsys, code, phrase):
    metrics = write_metrics(tmp_path / "metrics.json")
    out = tmp_path / "collected.csv"
    monkeypatch.setattr(pd.DataFrame, "to_csv", fail_with(code))
    assert main(["collect", "--out", str(out), str(metrics)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [err.strip()] and err.startswith("error: ")
    assert phrase.format(out=out) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]  # nothing partial


def test_a_short_write_on_a_full_disk_is_named(tmp_path, monkeypatch):
    """numpy's "N requested and M written" (no errno) on a full disk becomes ENOSPC."""
    monkeypatch.setattr(io, "FULL_BELOW_BYTES", 1 << 62)  # every disk is "full"
    with pytest.raises(OSError) as info, io.atomic_path(tmp_path / "a.npy") as tmp:
        tmp.write_bytes(b"x")
        raise OSError("3920000 requested and 1929088 written")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(tmp_path / "a.npy")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(OSError) as info, io.atomic_directory(tmp_path / "store") as tmp:
        np.save(tmp / "pixels.npy", np.zeros(3))
        raise RuntimeError("[enforce fail at inline_container.cc:626] . unexpected pos 5 vs 4")
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []


def test_a_short_write_with_space_left_is_not_blamed_on_the_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(io, "FULL_BELOW_BYTES", 0)
    with pytest.raises(RuntimeError, match="unexpected pos"), io.atomic_path(tmp_path / "a.pt"):
        raise RuntimeError("unexpected pos 5 vs 4")


@pytest.mark.parametrize(
    "target, phrase",
    [
        ("folder", "{out} is a folder; give the path of a file"),
        ("file/x.md", "a parent of {out} is a file, not a folder; fix the path"),
    ],
)
def test_an_output_path_that_cannot_be_a_file_is_one_error_line(tmp_path, capsys, target, phrase):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    out = tmp_path / target
    assert main(["params", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [f"error: {phrase.format(out=out)}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]
    assert list((tmp_path / "folder").iterdir()) == []


def test_a_full_disk_during_a_download_is_named_as_such_not_the_network(tmp_path, monkeypatch):
    """The disk fills while the bytes arrive (the real HTTP downloader writing to a file that
    runs out of space): the error names the disk and the file, never the network."""
    import hashlib

    import pooch.downloaders
    from helpers.http_server import serve_directory

    from benchlib.data.download import RemoteFile, fetch
    from benchlib.primitives.errors import BenchlibError

    payload = bytes(range(256)) * 4096
    root = tmp_path / "www"
    root.mkdir()
    (root / "data.bin").write_bytes(payload)

    class FullDisk:  # a file whose device fills up
        def __init__(self, path, mode):
            self.handle = open(path, mode)  # noqa: SIM115

        def write(self, data):
            self.handle.write(data[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.handle, name)

    monkeypatch.setattr(pooch.downloaders, "open", FullDisk, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    cache = tmp_path / "cache"
    with serve_directory(root) as (url, _):
        remote = RemoteFile("data.bin", f"{url}/data.bin", hashlib.sha256(payload).hexdigest())
        with pytest.raises(BenchlibError) as error:
            fetch(remote, cache, retries=0)
    message = str(error.value)
    assert message.startswith(f"no space left on the device of {cache / 'data.bin'}"), message
    assert "free some space and rerun" in message and "network" not in message
    assert list(cache.iterdir()) == []  # nothing partial kept
