"""FedAgain's corrupted clients: scenarios, client choice, per-image determinism, the store."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from benchlib.data.corruptions import (
    CORRUPTIONS,
    SCENARIOS,
    corrupt_image,
    corrupt_store,
    corrupted_clients,
    image_type,
    main,
    scenario_of,
    settings_key,
)
from benchlib.data.store import load_store, record_source, write_store
from benchlib.grid.axes import apply_axes, variants
from benchlib.primitives.errors import BenchlibError
from benchlib.primitives.seeding import derive_seed


def test_the_19_types_are_the_packages_all():
    from imagecorruptions import get_corruption_names

    assert tuple(get_corruption_names("all")) == CORRUPTIONS and len(CORRUPTIONS) == 19


def test_paper_scenarios_and_bad_values():
    assert {k: (v.ratio, v.severity) for k, v in SCENARIOS.items()} == {
        "none": (0.0, 1),
        "light": (0.1, 3),
        "moderate": (0.3, 4),
        "heavy": (0.4, 5),
        # Sec. 5.1.4's rho_k (tests/methods/test_fedagain_corrupted_clients.py)
        "image_fractions": (1.0, 3),
    }
    assert scenario_of({"ratio": 0.5, "severity": 2}).ratio == 0.5
    with pytest.raises(BenchlibError, match="unknown corruption scenario 'severe'"):
        scenario_of("severe")
    with pytest.raises(
        BenchlibError, match=r"corruption: severity: 6 is greater than the maximum of 5"
    ):
        scenario_of({"ratio": 0.1, "severity": 6})


@pytest.mark.parametrize(
    ("k", "ratio", "count"), [(10, 0.1, 1), (10, 0.3, 3), (10, 0.4, 4), (10, 0.5, 5), (5, 0.3, 2),
                              (20, 0.3, 6), (10, 0.0, 0)],
)  # fmt: skip
def test_corrupted_client_count_is_the_rounded_ratio(k, ratio, count):
    chosen = corrupted_clients(k, ratio, seed=3)
    assert (
        len(chosen) == count and chosen == sorted(set(chosen)) and all(0 <= c < k for c in chosen)
    )
    assert chosen == corrupted_clients(k, ratio, seed=3)


def test_corrupt_image_is_deterministic_and_keeps_shape():
    rng = np.random.default_rng(0)
    grey = rng.integers(0, 256, (28, 28), dtype=np.uint8)  # MNIST size: padded to 32, cropped
    rgb = rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)
    for name in ("gaussian_noise", "impulse_noise", "motion_blur", "spatter"):
        a, b = corrupt_image(grey, name, 5, 11), corrupt_image(grey, name, 5, 11)
        assert a.shape == (28, 28) and a.dtype == np.uint8 and np.array_equal(a, b)
        assert not np.array_equal(a, grey)
        c = corrupt_image(rgb, name, 3, 11)
        assert c.shape == (32, 32, 3) and np.array_equal(c, corrupt_image(rgb, name, 3, 11))
    assert not np.array_equal(corrupt_image(rgb, "gaussian_noise", 3, 1),
                              corrupt_image(rgb, "gaussian_noise", 3, 2))  # fmt: skip
    # severity orders the strength: contrast shrinks the spread of the values
    assert corrupt_image(rgb, "contrast", 5, 0).std() < corrupt_image(rgb, "contrast", 1, 0).std()


@pytest.fixture
def tiny(tmp_path):
    rng = np.random.default_rng(1)
    n, clients = 48, 4
    index = pd.DataFrame(
        {"sample_id": [f"s{i:03d}" for i in range(n)], "label": rng.integers(0, 3, n),
         "group": "", "source_split": ""}
    )  # fmt: skip
    pixels = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    write_store(tmp_path / "store", dataset="tiny", index=index, pixels=pixels, num_classes=3,
                sources=[])  # fmt: skip
    subsets = np.array(["train", "train", "val", "test"])[np.arange(n) % 4]
    split = pd.DataFrame(
        {"sample_id": index["sample_id"], "client": (np.arange(n) // 4) % clients,
         "subset": subsets, "group": ""}
    )  # fmt: skip
    split.to_csv(tmp_path / "split.csv", index=False)
    return tmp_path, pixels, split


def test_corrupt_store_touches_only_training_images_of_corrupted_clients(tiny):
    root, pixels, split = tiny
    train_only = {"ratio": 0.5, "severity": 2, "subsets": ["train"]}  # the declared option
    record_source(root / "store", "tiny_source")
    record = corrupt_store(root / "store", root / "split.csv", root / "out", 4,
                           scenario_of(train_only), seed=5)  # fmt: skip
    clients = corrupted_clients(4, 0.5, 5)
    assert record["clients"] == clients and len(clients) == 2
    out = load_store(root / "out")
    assert out.manifest["corruption"] == json.loads(json.dumps(record))
    assert out.dataset_source == "tiny_source"  # the copy keeps its provenance
    changed = [bool((out.pixels[i] != pixels[i]).any()) for i in range(len(pixels))]
    targets = (split["client"].isin(clients) & (split["subset"] == "train")).to_numpy()
    assert record["images"] == int(targets.sum()) == sum(record["types"].values())
    assert not any(c for c, t in zip(changed, targets, strict=True) if not t)  # rest identical
    for row in np.flatnonzero(targets):  # each image: its own type and seed, order-free
        client = int(split["client"][row])
        name = CORRUPTIONS[image_type(5, client, row)]
        expected = corrupt_image(pixels[row], name, 2, derive_seed(5, name, client, row))
        assert np.array_equal(out.pixels[row], expected)
    scenario = scenario_of(train_only)
    again = corrupt_store(root / "store", root / "split.csv", root / "out2", 4, scenario, seed=5)
    assert again == record
    assert np.array_equal(load_store(root / "out2").pixels, out.pixels)
    assert (out.index == load_store(root / "store").index).all().all()


def test_a_bad_split_leaves_no_output(tiny, capsys):
    root, _, split = tiny
    split.assign(client=split["client"] % 3).to_csv(root / "bad.csv", index=False)
    with pytest.raises(SystemExit):
        main(["corrupt", "--store", str(root / "store"), "--split", str(root / "bad.csv"),
              "--out", str(root / "out"), "--clients", "4", "--scenario", "light"])  # fmt: skip
    assert "error: split file" in capsys.readouterr().err
    assert not (root / "out").exists()
    assert not [p for p in root.iterdir() if p.name.startswith(".out")]


def test_corruption_axis_changes_the_store_not_the_split():
    from benchlib.data.corruptions import cell_store

    base = {"clients": 10, "corruption": "none", "split": {"seed": 0}}
    combos = variants({"corruption": ["none", "light", {"ratio": 0.3, "severity": 3}]})
    assert [s for s, _ in combos] == [
        "corruption_none", "corruption_light", "corruption_ratio0p3_severity3"
    ]  # fmt: skip
    assert apply_axes(base, combos[1][1])["corruption"] == "light"

    class Cfg:
        def __init__(self):
            self.datasets = {"d": base, "d__corruption_light": apply_axes(base, combos[1][1])}

        def store_name(self, name):
            return "d"

    assert cell_store(Cfg(), "d") == "results/data/d"
    key = settings_key(scenario_of("light"), 10, 0)
    assert (
        cell_store(Cfg(), "d__corruption_light") == f"results/corrupted/d__corruption_light/{key}"
    )
    with pytest.raises(BenchlibError, match="unknown corruption scenario"):
        apply_axes(base, {"corruption": "extreme"})


def test_frost_cache_is_bit_identical_and_the_benchmark_table():
    from benchlib.data.corruptions import benchmark, format_benchmark, use_frost_cache

    image = np.random.default_rng(2).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    use_frost_cache(False)
    plain = [corrupt_image(image, "frost", 4, s) for s in range(6)]
    use_frost_cache(True)
    cached = [corrupt_image(image, "frost", 4, s) for s in range(6)]
    assert all(np.array_equal(a, b) for a, b in zip(plain, cached, strict=True))
    rows = benchmark(names=["contrast"], repeats=2)
    assert rows[0]["corruption"] == "contrast" and all(rows[0][k] > 0 for k in ("first_s",
                                                                            "after_s"))  # fmt: skip
    assert format_benchmark(rows).splitlines()[1].startswith("contrast")


@pytest.mark.slow
def test_parallel_workers_write_the_same_store(tiny, monkeypatch):
    import benchlib.data.corruptions as corruptions

    root, _, _ = tiny
    scenario = scenario_of({"ratio": 0.5, "severity": 4})
    corrupt_store(root / "store", root / "split.csv", root / "seq", 4, scenario, seed=9)
    monkeypatch.setattr(corruptions, "IMAGES_PER_WORKER", 4)
    corrupt_store(root / "store", root / "split.csv", root / "par", 4, scenario, seed=9,
                  workers=2, chunk=3)  # fmt: skip
    assert np.array_equal(load_store(root / "seq").pixels, load_store(root / "par").pixels)
