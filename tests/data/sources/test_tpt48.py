"""TPT-48: the pinned download over a loopback server (real pickle format), the local copy, the
6 -> 6 month windows by hand, the state lists and the Table 4 config's held-out clients."""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import REPO
from helpers.http_server import serve_directory

from benchlib.data.registry import get_dataset
from benchlib.data.sources import tpt48
from benchlib.data.store import load_store
from benchlib.primitives.errors import BenchlibError

REAL = REPO.parent / "shared" / "data" / "tpt48" / tpt48.FILE


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


def synthetic_release(path: Path) -> dict[str, np.ndarray]:
    """A file in the release's format: a pickle of {state: float64[144]} (numpy arrays)."""
    rng = np.random.default_rng(0)
    data = {s: 50 + 20 * rng.standard_normal(144) for s in tpt48.STATES}
    path.write_bytes(pickle.dumps(data, protocol=2))
    return data


def test_state_lists():
    assert len(tpt48.STATES) == 48 and len(set(tpt48.STATES)) == 48
    for first, second in tpt48.SPLITS.values():
        assert len(first) == len(second) == 24 and not set(first) & set(second)
    # the data README's north/south lists
    assert "GA" in tpt48.SOUTH and "ND" in tpt48.NORTH and "CO" in tpt48.SOUTH
    # every eastern centroid lies east of every western one
    east = max(tpt48.CENTROID_LONGITUDE_W[s] for s in tpt48.EAST)
    west = min(tpt48.CENTROID_LONGITUDE_W[s] for s in tpt48.WEST)
    assert east < west
    assert {"ME", "FL", "IL"} <= set(tpt48.EAST) and {"CA", "TX", "MN"} <= set(tpt48.WEST)


def test_windows_by_hand():
    series = {s: np.arange(144, dtype=np.float64) + i for i, s in enumerate(tpt48.STATES)}
    index, x, y = tpt48.windows(series)
    # per state: windows 0..96 train (12 months within 0..107), 108..132 test, 97..107 dropped
    assert len(index) == 48 * (97 + 25)
    al = index[index["group"] == "AL"]
    assert (al["source_split"] == "train").sum() == 97 and (
        al["source_split"] == "test"
    ).sum() == 25
    stacked = np.stack([series[s] for s in tpt48.STATES])
    mean, std = stacked.mean(), stacked.std()
    row = index.index[index["sample_id"] == "AR-108"][0]  # AR = state 1: values month + 1
    assert index.at[row, "source_split"] == "test"
    np.testing.assert_allclose(x[row], (np.arange(108, 114) + 1 - mean) / std, rtol=1e-6)
    np.testing.assert_allclose(y[row], (np.arange(114, 120) + 1 - mean) / std, rtol=1e-6)
    assert "AL-097" not in set(index["sample_id"])


def test_download_over_loopback_and_checksum_mismatch(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    data = synthetic_release(www / tpt48.FILE)
    digest = hashlib.sha256((www / tpt48.FILE).read_bytes()).hexdigest()
    with serve_directory(www) as (url, requests):
        params = {
            "url": f"{url}/{tpt48.FILE}",
            "sha256": digest,
            "download_dir": str(tmp_path / "dl"),
        }
        get_dataset("tpt48").prepare(tmp_path / "store", params)
        assert requests == [f"/{tpt48.FILE}"]
        store = load_store(tmp_path / "store")
        assert store.task == "regression" and len(store.index) == 48 * 122
        assert store.manifest["sources"][0]["sha256"] == digest
        stacked = np.stack([data[s] for s in tpt48.STATES])
        row = list(store.index["sample_id"]).index("CA-005")
        expected = (data["CA"][5:11] - stacked.mean()) / stacked.std()
        np.testing.assert_allclose(np.asarray(store.inputs[row]), expected, rtol=1e-5)

        bad = {**params, "sha256": "0" * 64, "download_dir": str(tmp_path / "dl2")}
        with pytest.raises(BenchlibError, match="checksum mismatch"):
            get_dataset("tpt48").prepare(tmp_path / "store2", bad)
    assert not (tmp_path / "store2").exists()
    assert not (tmp_path / "dl2" / tpt48.FILE).exists()


def test_local_copy_checks_the_pinned_sha256(tmp_path):
    synthetic_release(tmp_path / tpt48.FILE)
    with pytest.raises(BenchlibError, match=r"checksum mismatch.*params\.sha256"):
        get_dataset("tpt48_local").prepare(tmp_path / "store", {"path": str(tmp_path)})
    assert not (tmp_path / "store").exists()
    with pytest.raises(BenchlibError, match="not found"):
        get_dataset("tpt48_local").prepare(tmp_path / "s", {"path": str(tmp_path / "nope.pkl")})


def test_a_pickle_with_code_is_refused(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / tpt48.FILE
    path.write_bytes(pickle.dumps({"AL": Evil()}))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(BenchlibError):
        get_dataset("tpt48_local").prepare(
            tmp_path / "store", {"path": str(path), "sha256": digest}
        )
    assert not (tmp_path / "store").exists()


def test_the_real_release(tmp_path):
    assert hashlib.sha256(REAL.read_bytes()).hexdigest() == tpt48.SHA256
    get_dataset("tpt48_local").prepare(tmp_path / "store", {"path": str(REAL)})
    store = load_store(tmp_path / "store")
    assert len(store.index) == 48 * 122 and store.index["group"].nunique() == 48
    assert abs(float(np.asarray(store.inputs).mean())) < 0.2


@pytest.mark.parametrize(
    ("config", "prefix"), [("config/tfl_tpt48.yaml", ""), ("config/paper/tfl.yaml", "tfl_")]
)
def test_table4_configs_hold_out_the_documented_states(config, prefix):
    datasets = yaml.safe_load((REPO / config).read_text())["datasets"]
    assert datasets[f"{prefix}tpt48_ew"]["held_out"] == tpt48.client_ids(tpt48.WEST)
    assert datasets[f"{prefix}tpt48_ns"]["held_out"] == tpt48.client_ids(tpt48.SOUTH)
