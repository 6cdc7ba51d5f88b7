"""Source images are opened with a bound: a file declaring absurd dimensions (a decompression
bomb of a few bytes) is one clear error at the prepare step, not PIL's exception."""

from __future__ import annotations

import json
import shutil
import struct
import zlib

import pytest
from helpers.paths import SHARED_DATA

from benchlib.commands.cli import main
from benchlib.data.images import open_image
from benchlib.data.sources.camelyon17 import decode_patch
from benchlib.primitives.errors import BenchlibError


def png_declaring(width: int, height: int) -> bytes:
    """A 60-byte PNG whose header declares ``width`` x ``height`` grey pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = zlib.compress(b"\x00" * 16)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", body) + chunk(b"IEND", b"")
    )


BOMB = png_declaring(40_000, 40_000)


def test_an_image_declaring_absurd_dimensions_is_one_error():
    assert len(BOMB) < 100
    with pytest.raises(
        BenchlibError, match=r"patch 7 declares more than [\d,]+ pixels .*replace it"
    ):
        open_image(BOMB, "patch 7")
    with pytest.raises(BenchlibError, match="declares more than"):
        decode_patch(BOMB, "camelyon17 patch 3")
    with open_image(png_declaring(4, 4)) as image:  # an ordinary header opens as before
        assert image.size == (4, 4)


def test_prepare_with_a_bomb_image_ends_with_one_line(tmp_path, capsys):
    copy = tmp_path / "hc18"
    shutil.copytree(SHARED_DATA / "fetal_hc18_sample", copy)
    (copy / "SHA256SUMS").unlink()  # as a user's own copy would be
    (copy / "training_set/007_HC.png").write_bytes(BOMB)
    spec = {"dataset": "hc18", "source": "hc18", "params": {"path": str(copy)}}
    out = tmp_path / "store"
    assert main(["prepare", "--spec", json.dumps(spec), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("error: ")
    assert "007_HC.png declares more than" in err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["hc18"]
