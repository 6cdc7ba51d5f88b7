"""Opening source images with a bound: an image file that declares more pixels than PIL decodes
(a decompression bomb, or a damaged header) is one clear error, not PIL's exception."""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, Any

from benchlib.primitives.errors import BenchlibError


def open_image(source: str | Path | bytes | IO[bytes], name: str | None = None) -> Any:
    """``PIL.Image.open`` of a path, a file object or bytes (``name`` for messages)."""
    from PIL import Image

    what = name or (str(source) if isinstance(source, str | Path) else "an image")
    try:
        return Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    except Image.DecompressionBombError as exc:
        limit = Image.MAX_IMAGE_PIXELS or 0
        raise BenchlibError(
            f"{what} declares more than {2 * limit:,} pixels ({exc}); it is damaged or not an "
            "image of this dataset: replace it or remove it from the source"
        ) from exc
