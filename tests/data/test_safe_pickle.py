"""The restricted unpickler: numpy arrays and plain containers load; anything else is refused."""

from __future__ import annotations

import io
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
from helpers.paths import SHARED_DATA

from benchlib.data.safe_pickle import load_npy, load_pickle, loads
from benchlib.primitives.errors import BenchlibError

TPT48 = SHARED_DATA / "tpt48" / "month_temp_data.pkl"


class Exploit:
    """Runs a shell command when unpickled by a plain unpickler."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def nested() -> dict:
    return {
        "structures": {
            "liver": np.array([[0, 1], [1, 1]], dtype=np.uint8),
            "artery": np.zeros((2, 2), dtype=bool),
        },
        "values": [1, 2.5, "x", None, True, (3, 4)],
        "scalar": np.float64(0.25),
        "empty": np.empty((0, 3), dtype=np.float32),
    }


def check_nested(loaded: dict) -> None:
    want = nested()
    assert loaded["values"] == want["values"]
    assert loaded["scalar"] == 0.25 and isinstance(loaded["scalar"], np.float64)
    for name, array in want["structures"].items():
        got = loaded["structures"][name]
        assert got.dtype == array.dtype and np.array_equal(got, array)
    assert loaded["empty"].shape == (0, 3) and loaded["empty"].dtype == np.float32


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_of_arrays_and_containers_loads_at_every_protocol(tmp_path, protocol):
    path = tmp_path / "data.pkl"
    path.write_bytes(pickle.dumps(nested(), protocol=protocol))
    check_nested(load_pickle(path))


def test_npy_with_a_pickled_dict_loads_like_np_load(tmp_path):
    path = tmp_path / "P001_IMG1.npy"
    np.save(path, nested(), allow_pickle=True)
    array = load_npy(path)
    assert array.shape == () and array.dtype == object
    check_nested(array.item())
    check_nested(np.load(path, allow_pickle=True).item())  # the same as numpy's own reader
    with open(path, "rb") as stream:
        check_nested(load_npy(io.BytesIO(stream.read()), "member.npy").item())


@pytest.mark.parametrize("order", ["C", "F"])
def test_npy_without_pickle_loads_from_a_path_and_a_stream(tmp_path, order):
    path = tmp_path / "plain.npy"
    array = np.asarray(np.arange(12, dtype=">i2").reshape(3, 4), order=order)
    np.save(path, array)
    assert np.array_equal(load_npy(path), array) and load_npy(path).dtype == array.dtype
    with open(path, "rb") as stream:
        assert np.array_equal(load_npy(stream, "plain.npy"), array)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(BenchlibError, match="truncated"):
        load_npy(path)


def test_real_tpt48_pickle_loads():
    data = load_pickle(TPT48)
    assert isinstance(data, dict) and len(data) == 48
    series = next(iter(data.values()))
    assert isinstance(series, np.ndarray) and series.shape[-1] == 144


def test_malicious_pickle_is_refused_and_nothing_runs(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps({"ok": np.zeros(2), "bad": Exploit(marker)}))
    with pytest.raises(BenchlibError, match=r"evil.pkl: refusing to unpickle (posix|nt)\.system"):
        load_pickle(path)
    assert not marker.exists()


def test_malicious_npy_payload_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "evil.npy"
    np.save(path, np.array({"structures": Exploit(marker)}, dtype=object), allow_pickle=True)
    with pytest.raises(BenchlibError, match=r"refusing to unpickle .*system.*only numpy arrays"):
        load_npy(path)
    assert not marker.exists()


@pytest.mark.parametrize(
    "obj", [Path("x"), len, np.random.default_rng(0)], ids=["class", "function", "generator"]
)
def test_other_objects_are_refused(obj):
    with pytest.raises(BenchlibError, match="refusing to unpickle"):
        loads(pickle.dumps(obj))


def test_truncated_and_non_npy_files_give_one_error(tmp_path):
    good = pickle.dumps(nested())
    with pytest.raises(BenchlibError, match="not a readable pickle"):
        loads(good[: len(good) // 2])
    path = tmp_path / "fake.npy"
    path.write_bytes(b"not numpy at all")
    with pytest.raises(BenchlibError, match=r"fake\.npy: not a \.npy file"):
        load_npy(path)
