"""``fets``: FeTS 2022 brain-tumour MRI (TFL Table 3, Figures 5 and 9), bring your own.

The FeTS 2022 training data need a registration and a data request on Synapse (:data:`ACCESS`).
``params.path`` is the unpacked release folder (``MICCAI_FeTS2022_TrainingData``): a partitioning
CSV (``params.partitioning``, default ``partitioning_1.csv``, the split by originating
institution; ``partitioning_2.csv`` splits the large institutions further by tumour size) with
the columns ``Subject_ID`` and ``Partition_ID``, and one folder per subject
``<Subject_ID>/<Subject_ID>_{flair,t1,t1ce,t2,seg}.nii.gz`` (BraTS labels 0 background, 1
necrotic / non-enhancing core, 2 oedema, 4 enhancing tumour). A ``SHA256SUMS`` in the folder is
verified.

What the store holds (the paper gives none of it; docs/papers/tfl.md lists the choices):

- 2-D axial slices ``volume[:, :, z].T`` of every subject, those whose segmentation has at least
  ``params.min_tumor_pixels`` (default 1) tumour voxels, every ``params.slice_step``-th of them;
- four channels in ``params.modalities`` order (default flair, t1, t1ce, t2), each volume scaled
  to 0-255 between the 0.5 and 99.5 percentiles of its non-zero (brain) voxels, background 0;
  resized to ``params.size`` square (default 128; bilinear, masks nearest neighbour);
- masks by ``params.labels``: ``subregions`` (default; 0 background, 1 necrotic core, 2 oedema,
  3 enhancing = BraTS 4) or ``whole_tumor`` (0 / 1 = any tumour label);
- ``group`` = the institution (``inst_<Partition_ID, 3 digits>``), so the ``groups`` partition
  makes one client per institution in Partition_ID order; ``params.institutions`` keeps a subset;
- ``source_split``: per institution, a seeded ``params.test`` share (default 0.2, at least one
  subject) of its subjects is ``test``, the rest ``train``, so no subject has slices on both
  sides (use ``split.mode: source``).

Each image file is read once (hashed and decoded from the same bytes): a first pass over the
(small) segmentations picks the slices, a second reads the images and streams the slices into a
memory-mapped store, with progress in the log.
"""

from __future__ import annotations

import gzip
import hashlib
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.paths import resolve_input_path
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.seg_images import LOG, check_sha256sums
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require
from benchlib.primitives.seeding import numpy_rng

ACCESS = "https://www.synapse.org/#!Synapse:syn28546456/wiki/617093"
LAYOUT = (
    "the FeTS 2022 training folder (MICCAI_FeTS2022_TrainingData) with partitioning_1.csv "
    "(columns Subject_ID, Partition_ID) and one folder per subject "
    "<Subject_ID>/<Subject_ID>_{flair,t1,t1ce,t2,seg}.nii.gz"
)
MODALITIES = ("flair", "t1", "t1ce", "t2")
BRATS_LABELS = (0, 1, 2, 4)
LABEL_SETS: dict[str, dict[int, int]] = {
    "subregions": {0: 0, 1: 1, 2: 2, 4: 3},
    "whole_tumor": {0: 0, 1: 1, 2: 1, 4: 1},
}
CLASS_NAMES = {
    "subregions": ["background", "necrotic core", "oedema", "enhancing"],
    "whole_tumor": ["background", "tumour"],
}
DEFAULT_SIZE = 128
PERCENTILES = (0.5, 99.5)


@dataclass(frozen=True)
class FetsOptions:
    """The preparation settings of one FeTS store (from the dataset's params)."""

    modalities: tuple[str, ...]
    labels: str
    size: int
    min_tumor_pixels: int
    slice_step: int
    test: float
    seed: int

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> FetsOptions:
        modalities = tuple(params["modalities"])
        unknown = sorted(set(modalities) - set(MODALITIES))
        require(
            bool(modalities) and not unknown and len(set(modalities)) == len(modalities),
            f"fets params.modalities {list(modalities)}: give distinct names from {MODALITIES}",
        )
        labels = str(params["labels"])
        require(labels in LABEL_SETS, f"fets params.labels must be one of {sorted(LABEL_SETS)}")
        size = params["size"]
        require(
            isinstance(size, int) and 8 <= size <= 512, "fets params.size must be 8..512 pixels"
        )
        options = cls(
            modalities=modalities,
            labels=labels,
            size=int(size),
            min_tumor_pixels=int(params["min_tumor_pixels"]),
            slice_step=int(params["slice_step"]),
            test=float(params["test"]),
            seed=int(params["seed"]),
        )
        require(options.min_tumor_pixels >= 0, "fets params.min_tumor_pixels must be >= 0")
        require(options.slice_step >= 1, "fets params.slice_step must be >= 1")
        require(0 < options.test < 1, "fets params.test must be a fraction in (0, 1)")
        return options


def institution_group(partition_id: str) -> str:
    """``inst_007`` for Partition_ID ``7`` or ``07`` (sorts in Partition_ID order)."""
    return f"inst_{int(partition_id):03d}" if partition_id.isdigit() else f"inst_{partition_id}"


def read_partitioning(root: Path, name: str, institutions: list[Any] | None) -> pd.DataFrame:
    """``subject, group`` per subject of the partitioning CSV, sorted by group and subject."""
    path = root / name
    require(path.is_file(), f"{path} not found; params.path must be {LAYOUT}")
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    missing = [c for c in ("Subject_ID", "Partition_ID") if c not in table]
    require(not missing, f"{path}: no columns {missing}; a FeTS partitioning CSV has Subject_ID, "
            f"Partition_ID")  # fmt: skip
    table = table.assign(
        subject=table["Subject_ID"].str.strip(), partition=table["Partition_ID"].str.strip()
    )
    require(
        table["subject"].is_unique,
        f"{path}: a Subject_ID appears twice; restore the release's partitioning CSV",
    )
    if institutions:
        keep = {institution_group(str(i)) for i in institutions}
        table = table[table["partition"].map(institution_group).isin(keep)]
        require(len(table) > 0, f"{path}: no subjects of params.institutions {institutions}")
    table = table.assign(group=table["partition"].map(institution_group))
    return table[["subject", "group"]].sort_values(["group", "subject"]).reset_index(drop=True)


def subject_file(root: Path, subject: str, kind: str) -> Path:
    """``<root>/<subject>/<subject>_<kind>.nii.gz`` (or ``.nii``); a missing one is an error."""
    for suffix in (".nii.gz", ".nii"):
        path = root / subject / f"{subject}_{kind}{suffix}"
        if path.is_file():
            return path
    raise BenchlibError(
        f"{root / subject / f'{subject}_{kind}.nii.gz'} is missing; the FeTS folder is "
        f"incomplete: params.path must be {LAYOUT}"
    )


def read_volume(path: Path) -> tuple[np.ndarray, str]:
    """A NIfTI volume (3-D array) and the sha256 of the file, from one read of its bytes."""
    import nibabel

    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    try:
        image = nibabel.Nifti1Image.from_bytes(
            gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        )
        volume = np.asarray(image.dataobj)
    except (OSError, EOFError, zlib.error, ValueError, nibabel.filebasedimages.ImageFileError) as e:
        raise BenchlibError(f"{path} is not a readable NIfTI file ({e}); restore it") from e
    require(volume.ndim == 3, f"{path}: expected a 3-D volume, got shape {volume.shape}")
    return volume, digest


def map_labels(seg: np.ndarray, labels: str, where: str) -> np.ndarray:
    """BraTS labels (0, 1, 2, 4) -> the classes of label set ``labels`` (uint8)."""
    values = np.unique(seg)
    wrong = sorted(set(values.tolist()) - set(BRATS_LABELS))
    require(not wrong, f"{where}: labels {wrong} are not BraTS labels {BRATS_LABELS}; not a FeTS "
            "segmentation")  # fmt: skip
    table = np.zeros(max(BRATS_LABELS) + 1, dtype=np.uint8)
    for brats, cls in LABEL_SETS[labels].items():
        table[brats] = cls
    return table[seg.astype(np.int64)]


def tumour_slices(mask: np.ndarray, min_pixels: int, step: int) -> list[int]:
    """Axial indices z whose slice ``mask[:, :, z]`` has >= ``min_pixels`` tumour voxels, every
    ``step``-th of them."""
    counts = (mask > 0).sum(axis=(0, 1))
    chosen = np.flatnonzero(counts >= max(min_pixels, 0))
    return [int(z) for z in chosen[::step]]


def scale_intensity(volume: np.ndarray) -> np.ndarray:
    """uint8 volume: non-zero (brain) voxels scaled between their 0.5 / 99.5 percentiles to
    0..255 (clipped); zero voxels stay 0."""
    volume = volume.astype(np.float64)
    brain = volume != 0
    out = np.zeros(volume.shape, dtype=np.uint8)
    if not brain.any():
        return out
    low, high = np.percentile(volume[brain], PERCENTILES)
    span = high - low if high > low else 1.0
    scaled = np.clip((volume[brain] - low) / span, 0.0, 1.0) * 255.0
    out[brain] = np.rint(scaled).astype(np.uint8)
    return out


def resize_slice(image: np.ndarray, size: int, nearest: bool) -> np.ndarray:
    """A uint8 2-D slice resized to ``size`` x ``size`` (bilinear, or nearest for class masks)."""
    from PIL import Image

    if image.shape == (size, size):
        return image
    method = Image.Resampling.NEAREST if nearest else Image.Resampling.BILINEAR
    return np.asarray(Image.fromarray(image).resize((size, size), method), dtype=np.uint8)


def choose_test_subjects(table: pd.DataFrame, share: float, seed: int) -> set[str]:
    """Per institution, a seeded ``share`` (rounded, at least 1) of its subjects; an institution
    with one subject keeps it for training."""
    chosen: set[str] = set()
    for number, (_, members) in enumerate(table.groupby("group", sort=True)):
        subjects = sorted(members["subject"])
        if len(subjects) < 2:
            continue
        count = min(max(1, round(share * len(subjects))), len(subjects) - 1)
        order = numpy_rng(seed, "fets-test", number).permutation(len(subjects))
        chosen.update(subjects[i] for i in order[:count])
    return chosen


Paths = dict[str, dict[str, Path]]  # subject -> file kind (modality or "seg") -> path


def select_slices(
    root: Path, table: pd.DataFrame, paths: Paths, options: FetsOptions, hashes: dict[str, str]
) -> dict[str, list[int]]:
    """Pass 1: subject -> the axial slices to store, from its segmentation (hashed into
    ``hashes``)."""
    slices: dict[str, list[int]] = {}
    for i, subject in enumerate(table["subject"]):
        seg, digest = read_volume(paths[subject]["seg"])
        hashes[paths[subject]["seg"].relative_to(root).as_posix()] = digest
        mask = map_labels(seg, options.labels, str(paths[subject]["seg"]))
        slices[subject] = tumour_slices(mask, options.min_tumor_pixels, options.slice_step)
        if (i + 1) % 10 == 0 or i + 1 == len(table):
            LOG.info("fets: %d/%d segmentations read", i + 1, len(table))
    require(
        any(slices.values()),
        f"{root}: no slice has >= {options.min_tumor_pixels} tumour voxels; lower "
        "params.min_tumor_pixels",
    )
    return slices


def stream_slices(
    root: Path,
    table: pd.DataFrame,
    paths: Paths,
    slices: dict[str, list[int]],
    options: FetsOptions,
    hashes: dict[str, str],
    pixels: np.ndarray,
    masks: np.ndarray,
) -> list[tuple[str, str]]:
    """Pass 2: each subject's chosen slices (channels, mask) into the memory-mapped ``pixels`` /
    ``masks`` rows in table order; returns ``(sample id, group)`` per row."""
    rows: list[tuple[str, str]] = []
    for i, (subject, group) in enumerate(zip(table["subject"], table["group"], strict=True)):
        chosen, start = slices[subject], len(rows)
        seg, _ = read_volume(paths[subject]["seg"])
        mask = map_labels(seg, options.labels, str(paths[subject]["seg"]))
        for c, modality in enumerate(options.modalities):
            path = paths[subject][modality]
            volume, digest = read_volume(path)
            hashes[path.relative_to(root).as_posix()] = digest
            require(
                volume.shape == mask.shape,
                f"{path}: shape {volume.shape} differs from its segmentation's {mask.shape}; the "
                "subject's files do not belong together",
            )
            scaled = scale_intensity(volume)
            for j, z in enumerate(chosen):
                pixels[start + j, :, :, c] = resize_slice(scaled[:, :, z].T, options.size, False)
        for j, z in enumerate(chosen):
            masks[start + j] = resize_slice(mask[:, :, z].T, options.size, nearest=True)
            rows.append((f"{subject}/z{z:03d}", group))
        if (i + 1) % 10 == 0 or i + 1 == len(table):
            LOG.info("fets: %d/%d subjects, %d/%d slices stored", i + 1, len(table), len(rows),
                     len(pixels))  # fmt: skip
    return rows


def prepare_fets(out_dir: Path, params: dict[str, Any]) -> None:
    """Select tumour slices of every subject and stream them with their masks into a store."""
    import tempfile

    root = resolve_input_path(params["path"], "fets params.path")
    options = FetsOptions.from_params(params)
    partitioning = str(params["partitioning"])
    # institutions is unset by default: every institution
    table = read_partitioning(root, partitioning, params.get("institutions"))
    paths = {
        s: {k: subject_file(root, s, k) for k in (*options.modalities, "seg")}
        for s in table["subject"]
    }
    hashes: dict[str, str] = {}
    slices = select_slices(root, table, paths, options, hashes)
    total, size = sum(len(z) for z in slices.values()), options.size
    testing = choose_test_subjects(table, options.test, options.seed)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp:
        pixels = np.lib.format.open_memmap(
            Path(tmp) / "pixels.npy",
            mode="w+",
            dtype=np.uint8,
            shape=(total, size, size, len(options.modalities)),
        )
        masks = np.lib.format.open_memmap(
            Path(tmp) / "masks.npy", mode="w+", dtype=np.uint8, shape=(total, size, size)
        )
        rows = stream_slices(root, table, paths, slices, options, hashes, pixels, masks)
        pixels.flush()
        masks.flush()
        hashes[partitioning] = hashlib.sha256((root / partitioning).read_bytes()).hexdigest()
        check_sha256sums(root, hashes, "FeTS")
        index = pd.DataFrame(rows, columns=["sample_id", "group"])
        subjects = index["sample_id"].str.split("/").str[0]
        index["label"] = 0
        index["source_split"] = np.where(subjects.isin(testing), "test", "train")
        counts = (
            index.assign(subject=subjects)
            .groupby("group")
            .agg(slices=("sample_id", "size"), subjects=("subject", "nunique"))
        )
        write_store(
            out_dir,
            dataset="fets",
            index=index,
            pixels=pixels,
            masks=masks,
            num_classes=len(CLASS_NAMES[options.labels]),
            task="segmentation",
            sources=[{"name": n, "sha256": d} for n, d in sorted(hashes.items())],
            extra={
                "partitioning": partitioning,
                "modalities": list(options.modalities),
                "labels": options.labels,
                "classes": CLASS_NAMES[options.labels],
                "subjects": len(table),
                "test_subjects": sorted(testing),
                "institutions": {
                    g: {"subjects": int(r.subjects), "slices": int(r.slices)}
                    for g, r in counts.iterrows()
                },
                "min_tumor_pixels": options.min_tumor_pixels,
                "slice_step": options.slice_step,
                "image_size": size,
            },
        )


register_dataset(
    DatasetSource(
        name="fets",
        build=prepare_fets,
        num_classes=len(CLASS_NAMES["subregions"]),
        image_shape=(len(MODALITIES), DEFAULT_SIZE, DEFAULT_SIZE),
        task="segmentation",
        description="FeTS 2022 brain-tumour MRI, axial tumour slices per institution (TFL Table 3)",
        params=Params(
            {
                # unset until the user has the data: a missing copy stops the prepare step
                "path": Param({"type": "string"}, description=f"your local copy: {LAYOUT}"),
                "partitioning": Param(
                    {"type": "string"},
                    "partitioning_1.csv",
                    "the partitioning CSV (partitioning_2.csv splits large institutions)",
                ),
                "institutions": Param(
                    {"type": "array", "items": {"type": ["integer", "string"]}},
                    description="Partition_IDs to keep (default: every institution)",
                ),
                "modalities": Param(
                    {
                        "type": "array",
                        "items": {"enum": list(MODALITIES)},
                        "minItems": 1,
                        "uniqueItems": True,
                    },
                    list(MODALITIES),
                    "the image channels, in order",
                ),
                "labels": Param(
                    {"enum": sorted(LABEL_SETS)},
                    "subregions",
                    "mask classes: BraTS subregions, or whole tumour vs background",
                ),
                "size": Param(
                    {"type": "integer", "minimum": 8, "maximum": 512},
                    DEFAULT_SIZE,
                    "side length of the square slices (px)",
                ),
                "min_tumor_pixels": Param(
                    {"type": "integer", "minimum": 0}, 1, "least tumour voxels of a kept slice"
                ),
                "slice_step": Param(
                    {"type": "integer", "minimum": 1}, 1, "keep every n-th tumour slice"
                ),
                "test": Param(
                    {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                    0.2,
                    "share of each institution's subjects in source_split test",
                ),
                "seed": Param({"type": "integer"}, 0, "seed of the test-subject draw"),
            }
        ),
        access_page=f"{ACCESS} (expected: {LAYOUT})",
    )
)
