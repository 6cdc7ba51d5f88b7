"""Tiny FeTS 2022-format folders (NIfTI volumes with known tumours, partitioning_1.csv) and a
config that runs FedAvg and TFL on one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchlib.data.sources import fets

SHAPE = (16, 16, 6)  # x, y, z
INSTITUTIONS = {1: 2, 2: 2, 3: 2, 4: 2}  # Partition_ID -> subjects


def tumour(shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """BraTS labels: oedema (2) square x, y in 4..8 with a necrotic core (1) at x, y 5..6 and an
    enhancing column (4) at x = 7, y 5..6, on slices z = 1..3; one oedema voxel on z = 4."""
    seg = np.zeros(shape, dtype=np.uint8)
    seg[4:9, 4:9, 1:4] = 2
    seg[5:7, 5:7, 1:4] = 1
    seg[7, 5:7, 1:4] = 4
    seg[10, 10, 4] = 2
    return seg


def modality(channel: int, shape: tuple[int, int, int] = SHAPE) -> np.ndarray:
    """Brain x, y in 2..13 (all z): 10 or 30 by a per-modality pattern (scaled to 0 / 255);
    flair: 30 where x < 8; t1: where y < 8; t1ce: where x + y is even; t2: where x >= 8."""
    x, y = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    high = [x < 8, y < 8, (x + y) % 2 == 0, x >= 8][channel]
    plane = np.where(high, 30.0, 10.0) + channel  # distinct raw values per modality
    brain = (x >= 2) & (x <= 13) & (y >= 2) & (y <= 13)
    return np.repeat(np.where(brain, plane, 0.0)[:, :, None], shape[2], axis=2).astype(np.float32)


def write_nifti(path: Path, volume: np.ndarray) -> None:
    import nibabel

    nibabel.save(nibabel.Nifti1Image(volume, np.eye(4)), str(path))


def write_fets(root: Path, seg: np.ndarray | None = None) -> list[str]:
    """A FeTS 2022-format folder: subject folders with 5 .nii.gz each, partitioning_1.csv."""
    root.mkdir(parents=True)
    rows, subjects = [], []
    for partition, count in INSTITUTIONS.items():
        for _ in range(count):
            subject = f"FeTS2022_{len(subjects):05d}"
            folder = root / subject
            folder.mkdir()
            for c, name in enumerate(fets.MODALITIES):
                write_nifti(folder / f"{subject}_{name}.nii.gz", modality(c))
            write_nifti(folder / f"{subject}_seg.nii.gz", tumour() if seg is None else seg)
            rows.append((subject, f"{partition:02d}"))
            subjects.append(subject)
    pd.DataFrame(rows, columns=["Subject_ID", "Partition_ID"]).to_csv(
        root / "partitioning_1.csv", index=False
    )
    return subjects


def tiny_config(root: Path) -> dict:
    return {
        "datasets": {
            "fets": {
                "source": "fets",
                "task": "segmentation",
                "params": {"path": str(root), "size": 32, "min_tumor_pixels": 2},
                "clients": 4,
                "partition": {"name": "groups"},
                "split": {"mode": "source", "val_from_train": "1/3", "seed": 0},
                "held_out": [3],
                "model": {"name": "unet", "params": {"features": [4, 4, 8, 8, 16, 4]}},
                "training": {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "batch_size": 4,
                             "local_epochs": 2, "rounds": 2, "loss": "dice_ce",
                             "save_predictions": 3},
            }
        },
        "methods": {"fedavg": {"label": "FedAvg"},
                    "tfl": {"label": "TFL", "params": {"update_every": 1}}},
        "experiments": {"fets": {"dataset": "fets", "methods": ["fedavg", "tfl"],
                                 "malfunctions": ["none"], "k": [0], "seeds": [0]}},
        "reports": {
            "fets_table": {"kind": "tfl_table", "metric": "dice", "methods": ["fedavg", "tfl"],
                           "rows": [{"label": "OOF", "experiment": "fets", "scope": "oof"}],
                           "quoted": {"OOF": {"fedavg": 71.45, "tfl": 74.29}}},
            "fets_fig": {"kind": "segmentation_examples", "experiment": "fets",
                         "methods": ["fedavg", "tfl"], "per_client": 2, "channel_label": "FLAIR"},
        },
    }  # fmt: skip
