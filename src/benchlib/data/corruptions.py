"""FedAgain's corrupted clients: Hendrycks-style image corruptions of their local data.

Paper Sec. 5.1.4 and 5.3: a fraction ``ratio`` of the clients is corrupted; their local data is
modified and the test data stays clean ("corruption was applied only to the training data of
affected clients, while the global model was always evaluated on clean test sets"). By default
a corrupted client's training *and validation* images are corrupted: the validation split is
the client's own data too, and FedAgain's benchmark error E_k (Eq. 7, the global model's loss
on it) is meant to reflect "the quality of the client data" - on a clean validation split it
could not see the corruption. The reading with clean validation data is the declared option
``subsets: [train]`` of a ``{ratio, severity}`` corruption. Every corrupted image gets one
corruption type drawn at random from the 19
of ``imagecorruptions`` (the maintained fork ``imagecorruptions-imaug`` 1.1.5: the PyPI
``imagecorruptions`` 1.1.2 fails on current scikit-image and NumPy) at the scenario's severity.
The paper's scenarios: ``light`` (10 % of clients, severity 3), ``moderate`` (30 %, 4), ``heavy``
(40 %, 5). The package's constants are its ImageNet-scale ones (also on 32 px images).

Determinism: which clients are corrupted is a function of (seed, number of clients); the type
and the noise of an image are functions of (seed, client, store row) only, so worker count and
order never change the result. Images under 32 px (MNIST's 28 px; the package needs >= 32) are
zero-padded to 32 px, corrupted and cropped back; grey images are corrupted as RGB and the first
channel is kept.

Cost: every type takes milliseconds per 32 px image once a process is warm; glass blur's pixel
shuffle is compiled by numba on its first call in a process (about 4-5 s), which a naive
per-image measurement charges to the first image. Workers compile it once, when they start
(``_warm_up``), so a store costs (images x mean per-image time) / workers. ``python -m
benchlib.data.corruptions bench`` prints the per-type table (cold first call vs warm).

Command line (the Snakemake rule ``corrupt_store`` runs it)::

    python -m benchlib.data.corruptions corrupt --store S --split SPLIT.csv --out DIR \
        --scenario '{"ratio": 0.3, "severity": 4}' --seed 0 --clients 10 [--workers 2] \
        [--settings KEY]

Stale stores: a corrupted store lives under ``results/corrupted/<dataset>/<settings key>``
(:func:`settings_key`: the resolved scenario, defaults included, clients, seed and
:data:`STORE_FORMAT`), so changing a setting or a default yields a new path that Snakemake
builds, and switching back reuses the old one.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchlib.data.progress import ItemProgress
from benchlib.declarations.params import Param, Params
from benchlib.primitives import layout
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.seeding import derive_seed, numpy_rng

LOG = logging.getLogger("benchlib")

# The 19 corruptions of imagecorruptions ("all"), in the package's order.
CORRUPTIONS: tuple[str, ...] = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
    "speckle_noise",
    "gaussian_blur",
    "spatter",
    "saturate",
)
IMAGES_PER_WORKER = 2000
SEEDED_BY_ARGUMENT = ("glass_blur", "impulse_noise")  # they take seed=; others use np.random
MIN_SIDE = 32


# which subsets of a corrupted client are corrupted: its local data (default) or training only
SUBSET_READINGS: tuple[tuple[str, ...], ...] = (("train", "val"), ("train",))


@dataclass(frozen=True)
class Scenario:
    """A corruption setting: the fraction of corrupted clients, the severity (1..5), the
    corrupted clients' subsets that are corrupted (test data never is) and ``image_fraction``,
    the share rho_k of a corrupted client's images that are corrupted (paper Sec. 5.1.4): one
    number for every client, or a tuple of values of which each client draws one (seeded)."""

    ratio: float
    severity: int
    subsets: tuple[str, ...] = SUBSET_READINGS[0]
    image_fraction: float | tuple[float, ...] = 1.0

    def to_dict(self) -> dict[str, Any]:
        """The complete corruption mapping (every key of :data:`CORRUPTION` given; lists, as
        JSON and the schema have them)."""
        fraction = self.image_fraction
        return {
            "ratio": self.ratio,
            "severity": self.severity,
            "subsets": list(self.subsets),
            "image_fraction": list(fraction) if isinstance(fraction, tuple) else fraction,
        }


SCENARIOS: dict[str, Scenario] = {
    "none": Scenario(0.0, 1),
    "light": Scenario(0.1, 3),
    "moderate": Scenario(0.3, 4),
    "heavy": Scenario(0.4, 5),
    # Sec. 5.1.4: every client, rho_k drawn from {0, 10, 30, 50} %, the default severity 3
    "image_fractions": Scenario(1.0, 3, image_fraction=(0.0, 0.1, 0.3, 0.5)),
}
_UNIT = {"type": "number", "minimum": 0, "maximum": 1}
CORRUPTION = Params(
    {
        "ratio": Param(
            _UNIT,
            description="share of clients corrupted: round(ratio x clients), a seeded choice",
            required=True,
        ),
        "severity": Param(
            {"type": "integer", "minimum": 1, "maximum": 5},
            description="severity of every corruption (1..5)",
            required=True,
        ),
        "subsets": Param(
            {
                "type": "array",
                "items": {"enum": ["train", "val"]},
                "minItems": 1,
                "uniqueItems": True,
            },
            list(SUBSET_READINGS[0]),
            "which local data of a corrupted client is corrupted: [train, val] (FedAgain's "
            "benchmark loss sees the corruption) or [train] (clean validation data)",
        ),
        "image_fraction": Param(
            {"oneOf": [_UNIT, {"type": "array", "minItems": 1, "items": _UNIT}]},
            1.0,
            "rho_k, the share of a corrupted client's images (per subset) that are corrupted, a "
            "seeded choice (paper Sec. 5.1.4): one number for all clients, or a list of values "
            "of which each corrupted client draws one",
        ),
    }
)
"""The keys of a corruption mapping (the other form of a dataset's ``corruption``: a name)."""
# bump when the same settings would give a different store (forces a rebuild: new path)
STORE_FORMAT = 2


def corruption_schema() -> dict[str, Any]:
    """The config schema of a dataset's ``corruption``: a scenario name or a mapping."""
    return {
        "if": {"type": "string"},
        "then": {"enum": list(SCENARIOS)},
        "else": CORRUPTION.schema(),
    }


def scenario_of(value: Scenario | str | dict[str, Any] | None) -> Scenario:
    """A scenario by name or mapping (checked against :data:`CORRUPTION`, defaults filled;
    None, no corruption given, is ``none``; a resolved one as it is); one clear error
    otherwise."""
    if isinstance(value, Scenario):
        return value
    if value is None:
        return SCENARIOS["none"]
    if isinstance(value, str):
        require(
            value in SCENARIOS,
            f"unknown corruption scenario {value!r}; choose one of {', '.join(SCENARIOS)} or "
            "give {ratio: 0..1, severity: 1..5}",
        )
        return SCENARIOS[value]
    require(
        isinstance(value, dict),
        f"corruption {value!r} must be a scenario name or "
        "{ratio, severity[, subsets, image_fraction]}",
    )
    given = CORRUPTION.resolve("corruption", value)
    subsets = [r for r in SUBSET_READINGS if set(r) == set(given["subsets"])]
    require(
        bool(subsets),
        f"corruption subsets must be [train, val] (default: the client's local data) or [train] "
        f"(clean validation data), got {given['subsets']!r}",
    )
    fraction = given["image_fraction"]
    return Scenario(
        float(given["ratio"]),
        int(given["severity"]),
        subsets[0],
        tuple(float(v) for v in fraction) if isinstance(fraction, list) else float(fraction),
    )


def resolved_json(scenario: Scenario) -> str:
    """A scenario as canonical JSON with every default filled in (the workflow's rule
    parameter: spelling a default out, or leaving it out, does not rerun the rule)."""
    return json.dumps(scenario.to_dict(), sort_keys=True)


def settings_key(scenario: Scenario, num_clients: int, seed: int) -> str:
    """12 hex digits naming a corrupted store's settings (defaults filled in, plus
    :data:`STORE_FORMAT`): a store built with other settings lives under another path, so a
    changed setting or default makes Snakemake build a new one instead of reusing it."""
    record = {"format": STORE_FORMAT, **scenario.to_dict(), "clients": num_clients, "seed": seed}
    text = json.dumps(record, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


CORRUPTED_ROOT = layout.CORRUPTED


def corruption_of(dataset: dict[str, Any]) -> Scenario | None:
    """The corruption of a dataset's checked config entry (None when ratio 0, e.g. absent)."""
    scenario = scenario_of(dataset["corruption"])
    return scenario if scenario.ratio > 0 else None


def cell_store(config: Any, dataset: str) -> str:
    """The store directory the cells of ``dataset`` read: its corrupted copy when the entry
    has a corruption (rule ``corrupt_store``: ``results/corrupted/<dataset>/<settings key>``),
    else its prepared store."""
    entry = config.datasets[dataset]
    scenario = corruption_of(entry)
    if scenario is not None:
        seed = int(entry["split"]["seed"])
        return f"{CORRUPTED_ROOT}/{dataset}/{settings_key(scenario, int(entry['clients']), seed)}"
    return layout.store_dir(config.store_name(dataset))


def corrupted_clients(num_clients: int, ratio: float, seed: int) -> list[int]:
    """round(ratio * K) clients (half up), drawn with the seed; sorted."""
    count = int(np.floor(ratio * num_clients + 0.5))
    rng = numpy_rng(seed, "corruption/clients", num_clients)
    return sorted(int(c) for c in rng.permutation(num_clients)[:count])


def client_fractions(
    clients: list[int], image_fraction: float | tuple[float, ...], seed: int
) -> dict[int, float]:
    """rho_k of every corrupted client: the fixed fraction, or one value of the tuple drawn
    per client with (seed, client)."""
    if not isinstance(image_fraction, tuple):
        return dict.fromkeys(clients, float(image_fraction))
    return {
        c: image_fraction[
            int(numpy_rng(seed, "corruption/fraction", c).integers(len(image_fraction)))
        ]
        for c in clients
    }


def picked_rows(
    rows: np.ndarray, fraction: float, seed: int, client: int, subset: str
) -> np.ndarray:
    """The store rows (sorted) of one client's subset that are corrupted: round(fraction x n)
    (half up) of ``rows``, a seeded choice from (seed, client, subset) only."""
    rows = np.sort(np.asarray(rows, dtype=np.int64))
    count = int(np.floor(fraction * len(rows) + 0.5))
    if count >= len(rows):
        return rows
    rng = numpy_rng(seed, f"corruption/images/{subset}", client)
    return np.sort(rows[rng.permutation(len(rows))[:count]])


def image_type(seed: int, client: int, row: int) -> int:
    """The corruption type (index into :data:`CORRUPTIONS`) of store row ``row``."""
    return int(numpy_rng(seed, "corruption/type", client, row).integers(len(CORRUPTIONS)))


class _CachedImread:
    """Stands in for the package's ``cv2`` module: ``imread`` decodes each frost texture once
    per process and ``resize`` of such a texture is computed once per target size (the package
    decodes a large PNG/JPEG and rescales it on every frost call); everything else is cv2's own.
    Outputs are bit-identical: frost never writes into the texture or its rescaled copy."""

    def __init__(self, cv2: Any) -> None:
        self._cv2 = cv2
        self._cache: dict[str, np.ndarray] = {}
        self._textures: dict[int, str] = {}
        self._resized: dict[tuple[str, Any, Any], np.ndarray] = {}

    def imread(self, path: Any, *args: Any) -> np.ndarray:
        key = f"{path}|{args}"
        if key not in self._cache:
            self._cache[key] = self._cv2.imread(str(path), *args)
            self._textures[id(self._cache[key])] = key
        return self._cache[key]

    def resize(self, src: np.ndarray, dsize: Any = None, **kwargs: Any) -> np.ndarray:
        texture = self._textures.get(id(src))
        if texture is None:
            return self._cv2.resize(src, dsize, **kwargs)
        key = (texture, tuple(dsize), tuple(sorted(kwargs.items())))
        if key not in self._resized:
            self._resized[key] = self._cv2.resize(src, dsize, **kwargs)
        return self._resized[key]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cv2, name)


def use_frost_cache(enabled: bool = True) -> None:
    """Install (or remove) the texture cache of frost in this process."""
    from imagecorruptions import corruptions

    current = corruptions.cv2
    if enabled and not isinstance(current, _CachedImread):
        corruptions.cv2 = _CachedImread(current)
    elif not enabled and isinstance(current, _CachedImread):
        corruptions.cv2 = current._cv2


def corrupt_image(image: np.ndarray, name: str, severity: int, seed: int) -> np.ndarray:
    """One corrupted copy of a uint8 image ``[H, W]`` or ``[H, W, 3]`` (same shape and dtype).

    ``seed`` fixes all of the corruption's randomness.
    """
    from imagecorruptions import corrupt

    require(name in CORRUPTIONS, f"unknown corruption {name!r}; choose one of {CORRUPTIONS}")
    require(image.dtype == np.uint8, "corruptions need uint8 images")
    grey = image.ndim == 2
    h, w = image.shape[:2]
    padded = image
    if h < MIN_SIDE or w < MIN_SIDE:
        pad = [(0, max(MIN_SIDE - h, 0)), (0, max(MIN_SIDE - w, 0))] + [(0, 0)] * (image.ndim - 2)
        padded = np.pad(image, pad)
    np.random.seed(seed % (1 << 32))  # the package draws from NumPy's global generator
    kwargs = {"seed": seed % (1 << 32)} if name in SEEDED_BY_ARGUMENT else {}
    out = np.asarray(corrupt(padded, severity=severity, corruption_name=name, **kwargs))
    out = out[:h, :w]
    if grey:
        out = out[..., 0] if out.ndim == 3 else out
    return np.ascontiguousarray(out, dtype=np.uint8)


def _warm_up() -> None:
    """Compile glass blur's numba kernel once per process (instead of on the first image) and
    cache frost's textures."""
    use_frost_cache()
    corrupt_image(np.zeros((MIN_SIDE, MIN_SIDE, 3), np.uint8), "glass_blur", 1, 0)


def _corrupt_chunk(
    job: tuple[np.ndarray, list[tuple[int, int]], int, int],
) -> list[tuple[int, np.ndarray]]:
    images, keys, severity, seed = job
    out = []
    for image, (client, row) in zip(images, keys, strict=True):
        name = CORRUPTIONS[image_type(seed, client, row)]
        out.append(
            (row, corrupt_image(image, name, severity, derive_seed(seed, name, client, row)))
        )
    return out


def _chunks(
    pixels: np.ndarray, keys: list[tuple[int, int]], size: int, severity: int, seed: int
) -> Iterable[tuple[np.ndarray, list[tuple[int, int]], int, int]]:
    for start in range(0, len(keys), size):
        part = keys[start : start + size]
        yield np.asarray(pixels[[row for _, row in part]]), part, severity, seed


def corrupt_store(
    store_dir: str | Path,
    split_path: str | Path,
    out_dir: str | Path,
    num_clients: int,
    scenario: Scenario,
    seed: int,
    workers: int = 1,
    subsets: tuple[str, ...] | None = None,
    progress: bool = True,
    chunk: int = 256,
) -> dict[str, Any]:
    """Write a copy of the store whose corrupted clients' ``subsets`` images (default the
    scenario's: training and validation) are corrupted.

    The output directory appears only when complete (``write_store`` renames it into place);
    its manifest holds ``corruption``: the scenario, the clients, the subsets and the count of
    every type used. Returns that record.
    """
    import pandas as pd
    from tqdm import tqdm

    from benchlib.data.split import read_split
    from benchlib.data.store import load_store, write_store

    subsets = scenario.subsets if subsets is None else tuple(subsets)
    scenario = replace(scenario, subsets=subsets)
    require("test" not in subsets, "corruptions never touch test data")
    data = load_store(store_dir)
    require("pixels" in data.arrays, f"store {store_dir} holds no images; corruptions need images")
    split = read_split(split_path, data, num_clients)
    clients = corrupted_clients(num_clients, scenario.ratio, seed)
    row_of = pd.Series(np.arange(len(data.index)), index=data.index["sample_id"])
    chosen = split[split["client"].isin(clients) & split["subset"].isin(subsets)]
    fractions = client_fractions(clients, scenario.image_fraction, seed)
    keys = []
    for (client, subset), group in chosen.groupby(["client", "subset"], sort=True):
        rows = row_of[group["sample_id"]].to_numpy()
        picked = picked_rows(rows, fractions[int(client)], seed, int(client), str(subset))
        keys += [(int(client), int(row)) for row in picked]
    keys.sort(key=lambda key: key[1])
    pixels = np.array(data.pixels)  # a writable copy
    counts = dict.fromkeys(CORRUPTIONS, 0)
    for client, row in keys:
        counts[CORRUPTIONS[image_type(seed, client, row)]] += 1
    started = time.perf_counter()
    bar = tqdm(  # a terminal's bar; log lines (count, percent, ETA) in any case
        total=len(keys),
        desc="corrupting",
        unit="img",
        disable=not (progress and sys.stderr.isatty()),
        file=sys.stderr,
    )
    log = ItemProgress(f"corrupting {Path(store_dir).name}", len(keys), "images")
    jobs = _chunks(data.pixels, keys, chunk, scenario.severity, seed)
    # a worker costs seconds to start (imports, numba compiling glass blur): worth it only for
    # thousands of images each
    workers = max(1, min(workers, len(keys) // IMAGES_PER_WORKER))
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers, initializer=_warm_up) as pool:
            for result in pool.map(_corrupt_chunk, jobs):
                for row, image in result:
                    pixels[row] = image
                bar.update(len(result))
                log.update(len(result))
    else:
        _warm_up()
        for job in jobs:
            for row, image in _corrupt_chunk(job):
                pixels[row] = image
            bar.update(len(job[1]))
            log.update(len(job[1]))
    bar.close()
    log.close()
    record = {
        "ratio": scenario.ratio,
        "severity": scenario.severity,
        "seed": seed,
        "num_clients": num_clients,
        "clients": clients,
        "subsets": list(subsets),
        "image_fraction": scenario.image_fraction,
        "fractions": {str(c): f for c, f in fractions.items()},
        "settings": settings_key(scenario, num_clients, seed),
        "images": len(keys),
        "types": counts,
        "package": "imagecorruptions-imaug 1.1.5",
    }
    extra = {k: v for k, v in data.manifest.items() if k not in _STORE_KEYS}
    write_store(
        out_dir,
        dataset=str(data.manifest["dataset"]),
        index=data.index,
        pixels=pixels,
        num_classes=data.num_classes,
        sources=list(data.manifest.get("sources", [])),
        extra={**extra, "corruption": record},
        task=data.task,
        **{k: np.asarray(v) for k, v in data.arrays.items() if k not in ("pixels",)},
    )
    LOG.info(
        "corrupted %d %s images of clients %s in %.1fs -> %s",
        len(keys),
        "/".join(subsets),
        clients,
        time.perf_counter() - started,
        out_dir,
    )
    return record


_STORE_KEYS = {
    "dataset",
    "task",
    "num_samples",
    "num_classes",
    "image_shape",
    "arrays",
    "sources",
    "files",
    "sizes",
    "corruption",
    "manifest_sha256",
}


# ------------------------------------------------------------------------- benchmark
def benchmark(
    size: int = 32, severity: int = 3, repeats: int = 20, names: Iterable[str] = CORRUPTIONS
) -> list[dict[str, Any]]:
    """Seconds per image of every type on random ``size`` px RGB images, one fresh process per
    type (libraries imported first).

    Before (the package as it comes): ``first_s``, the type's first call in a process (what a
    naive one-image-per-process loop or every new worker pays; numba compiles glass blur then),
    and ``plain_s``, the mean of ``repeats`` later calls. After: ``after_s``, the mean per image
    in a running worker of :func:`corrupt_store` (glass blur compiled when the worker starts,
    frost's textures decoded and rescaled once: ``repeats`` untimed calls first, so the six
    textures' one-off cost, amortised over a store's thousands of images, is left out).
    """
    import subprocess

    rows = []
    for name in names:
        other = "pixelate" if name == "contrast" else "contrast"
        code = (
            "import time, numpy as np; import benchlib.data.corruptions as m; c = m.corrupt_image;"
            f"x = np.random.default_rng(0).integers(0, 256, ({size}, {size}, 3), dtype=np.uint8);"
            f"c(x, {other!r}, 1, 0); t = time.perf_counter(); c(x, {name!r}, {severity}, 0);"
            "a = time.perf_counter() - t; t = time.perf_counter();"
            f"[c(x, {name!r}, {severity}, s) for s in range({repeats})];"
            f"b = (time.perf_counter() - t) / {repeats}; m._warm_up();"
            f"[c(x, {name!r}, {severity}, s) for s in range({repeats})]; t = time.perf_counter();"
            f"[c(x, {name!r}, {severity}, s) for s in range({repeats})];"
            f"print(a, b, (time.perf_counter() - t) / {repeats})"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
        rows.append(
            {"corruption": name, "first_s": float(out[0]), "plain_s": float(out[1]),
             "after_s": float(out[2])}
        )  # fmt: skip
    return rows


def format_benchmark(rows: list[dict[str, Any]]) -> str:
    """The per-type table: seconds per image before (first call, later calls) and after."""
    head = f"{'corruption':18s} {'before: 1st call':>16s} {'before: later':>14s} {'after':>9s}"
    lines = [head]
    lines += [
        f"{r['corruption']:18s} {r['first_s']:16.4f} {r['plain_s']:14.5f} {r['after_s']:9.5f}"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchlib.data.corruptions")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("corrupt", help="write a store with corrupted clients")
    c.add_argument("--store", required=True)
    c.add_argument("--split", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--clients", type=int, required=True)
    c.add_argument("--scenario", required=True, help="name or JSON {ratio, severity[, subsets]}")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--workers", type=int, default=1)
    c.add_argument("--settings", help="the expected settings key (the store's path component)")
    b = sub.add_parser("bench", help="seconds per image of every corruption type")
    b.add_argument("--size", type=int, default=32)
    b.add_argument("--severity", type=int, default=3)
    b.add_argument("--repeats", type=int, default=20)
    b.add_argument("--json", help="also write the table as JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        if args.command == "corrupt":
            text = args.scenario
            try:
                value = json.loads(text)  # the workflow passes JSON ("light" or {...})
            except ValueError:
                value = text
            scenario = scenario_of(value)
            key = settings_key(scenario, args.clients, args.seed)
            require(
                args.settings in (None, key),
                f"corrupted store {args.out}: its path names settings {args.settings} but the "
                f"config's corruption gives {key}; request the cell's store path "
                "(benchlib.data.corruptions.cell_store) instead",
            )
            corrupt_store(
                args.store, args.split, args.out, args.clients, scenario, args.seed, args.workers
            )
        else:
            rows = benchmark(args.size, args.severity, args.repeats)
            print(format_benchmark(rows))
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=1))
    except BenchlibError as exc:
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
