"""What a cell checks of its store when it loads: the quick check by default (manifest, sizes,
index, headers), the full check of ``benchlib verify-store`` with ``training.verify_store``."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.store_edits import copy_store

from benchlib.fl.engine import CellRun
from benchlib.grid.spec import CellSpec
from benchlib.primitives.errors import BenchlibError


def _zero_pixels_in_place(store):
    """Pixels overwritten with zeros in place: same size, same header, other bytes."""
    pixels = np.load(store / "pixels.npy", mmap_mode="r+")
    pixels[:50] = 0
    pixels.flush()
    del pixels


@pytest.fixture
def zeroed_store(mnist_store, tmp_path):
    store = copy_store(mnist_store, tmp_path / "store")
    _zero_pixels_in_place(store)
    return store


def test_verify_store_checks_every_byte_before_the_cell(zeroed_store, smoke_split, smoke_cell_spec):
    spec = smoke_cell_spec("fedavg", "sfa", 1)
    CellRun(spec, zeroed_store, smoke_split)  # the quick check reads no pixel
    checked = dict(spec, training=dict(spec["training"], verify_store=True))
    with pytest.raises(BenchlibError, match=r"pixels\.npy does not match its manifest checksum"):
        CellRun(checked, zeroed_store, smoke_split)


def test_verify_store_is_left_out_of_the_config_hash(smoke_cell_spec):
    spec = smoke_cell_spec("fedavg", "sfa", 1)
    checked = dict(spec, training=dict(spec["training"], verify_store=True))
    assert CellSpec.from_json(checked).config_hash() == CellSpec.from_json(spec).config_hash()
    assert "verify_store" not in CellSpec.from_json(checked).recorded()["training"]
