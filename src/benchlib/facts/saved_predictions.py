"""Saved predictions: a few test samples' predicted class maps per client, in metrics.json.

A segmentation cell with ``training.save_predictions: n`` records, for every client it scores
(federation and held out), ``n`` of the client's test samples, evenly spaced over its test rows
in split order (the same samples for every method on the same split), with the predicted class
per pixel of the model that client is scored with. metrics.json then holds::

    "predictions": {"samples_per_client": n,
                    "clients": {"<client>": {"rows": [store rows], "masks": <encoded array>}}}

An encoded array is ``{"shape", "dtype", "zlib_base64"}``: the C-order bytes, zlib-compressed,
base64. Figures of predictions (``segmentation_examples``) decode them; this module imports no
torch (the report side must not).
"""

from __future__ import annotations

import base64
import zlib
from typing import Any

import numpy as np

from benchlib.primitives.errors import BenchlibError, require


def chosen_positions(count: int, n: int) -> list[int]:
    """``min(n, count)`` positions in ``0..count-1``, evenly spaced, first and last included."""
    if count <= 0 or n <= 0:
        return []
    if n >= count:
        return list(range(count))
    return np.rint(np.linspace(0, count - 1, n)).astype(int).tolist()


def encode_array(array: np.ndarray) -> dict[str, Any]:
    """A JSON-able encoding of a uint8 array."""
    array = np.ascontiguousarray(array)
    require(array.dtype == np.uint8, "saved predictions are uint8 class maps (a bug)")
    packed = base64.b64encode(zlib.compress(array.tobytes(), 9)).decode("ascii")
    return {"shape": list(array.shape), "dtype": "uint8", "zlib_base64": packed}


def decode_array(entry: dict[str, Any], where: str = "predictions") -> np.ndarray:
    """The array of :func:`encode_array`; a damaged entry is an error naming ``where``."""
    try:
        raw = zlib.decompress(base64.b64decode(entry["zlib_base64"]))
        array = np.frombuffer(raw, dtype=np.dtype(entry["dtype"]))
        return array.reshape(entry["shape"]).copy()
    except (KeyError, TypeError, ValueError, zlib.error) as exc:
        raise BenchlibError(
            f"{where}: not a saved prediction array ({exc}); run the cell again"
        ) from exc
