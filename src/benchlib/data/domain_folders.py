"""Multi-domain image datasets in the ``<domain>/<class>/<image>`` layout (PACS, OfficeHome).

:func:`register_domain_dataset` registers two sources per dataset: ``<name>`` fetches the zip
archive (no checksum is published, so the image, class and domain counts are verified;
``params.sha256`` may pin one) and ``<name>_local`` reads a local folder. Images are resized to
``params.image_size`` and every domain is dealt round-robin, sorted by class and file name, into
``params.clients_per_domain`` clients whose ``group`` is ``<domain>_<k>``.
"""

from __future__ import annotations

import logging
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchlib.data.download import (
    RemoteFile,
    download_params,
    fetch_source_file,
    register_remote_files,
)
from benchlib.data.images import open_image as open_bounded
from benchlib.data.paths import resolve_input_path
from benchlib.data.progress import ItemProgress
from benchlib.data.registry import DatasetSource, register_dataset
from benchlib.data.store import write_store
from benchlib.declarations.params import Param, Params
from benchlib.primitives.errors import BenchlibError, require

LOG = logging.getLogger("benchlib")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


@dataclass(frozen=True)
class DomainDataset:
    """A multi-domain image dataset in the ``<domain>/<class>/<image>`` layout."""

    name: str
    images: int
    classes: int
    domains: int
    archive: str = ""
    url: str = ""


def list_images(names: list[str]) -> list[tuple[str, str, str]]:
    """(domain, class, member) of every image among archive/folder member names: the last three
    path parts are ``<domain>/<class>/<file>``; other files are ignored."""
    found = []
    for name in names:
        parts = Path(name).parts
        hidden = any(p.startswith((".", "__MACOSX")) for p in parts)
        if len(parts) >= 3 and Path(name).suffix.lower() in IMAGE_SUFFIXES and not hidden:
            found.append((parts[-3], parts[-2], name))
    return sorted(found)


def check_counts(
    images: list[tuple[str, str, str]], dataset: DomainDataset, params: dict[str, Any], where: str
) -> None:
    """The release's image, class and domain counts (overridable through params)."""
    expected = {
        "images": int(params["expected_images"]),
        "classes": int(params["expected_classes"]),
        "domains": int(params["expected_domains"]),
    }
    actual = {
        "images": len(images),
        "classes": len({c for _, c, _ in images}),
        "domains": len({d for d, _, _ in images}),
    }
    wrong = [
        f"{k} {actual[k]} (expected {expected[k]})" for k in expected if actual[k] != expected[k]
    ]
    require(
        not wrong,
        f"{where}: {', '.join(wrong)}; this is not the complete {dataset.name} release: download "
        f"it again, or set params.expected_images/classes/domains for a deliberate subset",
    )


def build_domain_store(
    out_dir: Path,
    images: list[tuple[str, str, str]],
    open_image: Callable[[str], Any],
    dataset: DomainDataset,
    params: dict[str, Any],
    sources: list[dict[str, str]],
) -> None:
    """Decode, resize and store every image; clients per domain dealt round-robin."""
    from PIL import Image

    size = int(params["image_size"])
    per_domain = int(params["clients_per_domain"])
    classes = sorted({c for _, c, _ in images})
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    counters: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix=f".{out_dir.name}.", dir=out_dir.parent) as tmp:
        pixels = np.lib.format.open_memmap(
            Path(tmp) / "pixels.npy", mode="w+", dtype=np.uint8, shape=(len(images), size, size, 3)
        )
        progress = ItemProgress(f"{dataset.name}: decoding", len(images), "images")
        for i, (domain, label, member) in enumerate(images):
            image = open_image(member).convert("RGB").resize((size, size), Image.BILINEAR)
            pixels[i] = np.asarray(image, dtype=np.uint8)
            k = counters.get(domain, 0)
            counters[domain] = k + 1
            stem = Path(member).stem
            rows.append(
                (f"{domain}/{label}/{stem}", classes.index(label), f"{domain}_{k % per_domain}")
            )
            progress.update()
        progress.close()
        pixels.flush()
        index = pd.DataFrame(rows, columns=["sample_id", "label", "group"])
        index["source_split"] = ""
        write_store(
            out_dir,
            dataset=dataset.name,
            index=index,
            pixels=pixels,
            num_classes=len(classes),
            sources=sources,
            extra={
                "classes": classes,
                "domains": sorted(counters),
                "domain_sizes": dict(sorted(counters.items())),
                "image_size": size,
                "clients_per_domain": per_domain,
            },
        )


def _open_zip_member(archive: zipfile.ZipFile, path: Path) -> Callable[[str], Any]:

    def open_image(member: str) -> Any:
        try:
            with archive.open(member) as handle:
                image = open_bounded(handle, member)
                image.load()
        except (zipfile.BadZipFile, OSError, EOFError) as exc:
            raise BenchlibError(
                f"{path}: image {member} is unreadable ({exc}); the archive is corrupt: delete "
                "it and download again"
            ) from exc
        return image

    return open_image


def prepare_from_zip(out_dir: Path, params: dict[str, Any], dataset: DomainDataset) -> None:
    """Fetch (or re-check) the release zip and build the store."""
    remote, path = fetch_source_file(dataset.name, dataset.archive, params)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise BenchlibError(
            f"{path} is not a readable zip archive ({exc}); it is truncated or corrupt (Google "
            f"Drive may have sent a web page): delete it, or download the {dataset.name} zip by "
            f"hand and use source {dataset.name}_local"
        ) from exc
    with archive:
        images = list_images(archive.namelist())
        check_counts(images, dataset, params, str(path))
        sha = remote.sha256 or ""
        build_domain_store(
            out_dir, images, _open_zip_member(archive, path), dataset, params,
            [{"name": remote.url, "sha256": sha}],
        )  # fmt: skip


def prepare_from_folder(out_dir: Path, params: dict[str, Any], dataset: DomainDataset) -> None:
    """A local ``<domain>/<class>/<image>`` folder."""

    root = resolve_input_path(params["path"], f"{dataset.name}_local params.path")
    require(root.is_dir(), f"{dataset.name}_local params.path: {root} is not a folder")
    names = [str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]
    images = list_images(names)
    check_counts(images, dataset, params, str(root))

    def open_image(member: str) -> Any:
        try:
            image = open_bounded(root / member)
            image.load()
        except OSError as exc:
            raise BenchlibError(f"{root / member} is not a readable image ({exc})") from exc
        return image

    build_domain_store(
        out_dir, images, open_image, dataset, params, [{"name": str(root), "sha256": ""}]
    )


def domain_params(dataset: DomainDataset) -> dict[str, Param]:
    """The params both sources of ``dataset`` take: the counts to verify and the store's form."""
    count = {"type": "integer", "minimum": 1}
    return {
        "expected_images": Param(count, dataset.images, "images the release must have"),
        "expected_classes": Param(count, dataset.classes, "classes the release must have"),
        "expected_domains": Param(count, dataset.domains, "domains the release must have"),
        "image_size": Param(
            {"type": "integer", "minimum": 8}, 224, "side of the square RGB images (px)"
        ),
        "clients_per_domain": Param(
            count, 5, "clients (groups) each domain is dealt into, round-robin"
        ),
    }


def register_domain_dataset(dataset: DomainDataset, description: str) -> None:
    """Register ``<name>`` (download) and ``<name>_local`` (folder) sources."""
    files = (RemoteFile(dataset.archive, dataset.url, "", pinned=False),)
    register_remote_files(dataset.name, files)
    path = Param(
        {"type": "string"},
        description="a local folder laid out <domain>/<class>/<image>",
        required=True,
    )
    for name, build, params in (
        (
            dataset.name,
            lambda out, p: prepare_from_zip(out, p, dataset),
            {**download_params(files), **domain_params(dataset)},
        ),
        (
            f"{dataset.name}_local",
            lambda out, p: prepare_from_folder(out, p, dataset),
            {"path": path, **domain_params(dataset)},
        ),
    ):
        register_dataset(
            DatasetSource(
                name=name,
                build=build,
                params=Params(params),
                num_classes=dataset.classes,
                image_shape=(3, 224, 224),
                description=description,
            )
        )
