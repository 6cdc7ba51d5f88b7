"""Restricted unpickling of downloaded data: numpy arrays and plain containers only.

Pickles can run any code when loaded (a ``__reduce__`` may return ``os.system``), so downloaded
pickles are never read with plain :func:`pickle.load` or ``np.load(allow_pickle=True)``. This
module's unpickler resolves only the globals numpy needs to rebuild arrays, dtypes and numpy
scalars (and ``_codecs.encode`` and ``bytes``, which protocols 0-2 use to write bytes); dicts,
lists, tuples, strings, numbers, booleans and None need no globals at all. Anything else (a
function, a class, ``os.system``...) stops the load with one :class:`BenchlibError` naming the
file and the object.

Public API: :func:`load_pickle` (a plain pickle file), :func:`load_npy` (a ``.npy`` file, also
one whose payload is a pickle, as ``np.save`` writes object arrays), :func:`loads` (bytes).
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from benchlib.primitives.errors import BenchlibError

# (module, name) pairs a pickle of numpy arrays / plain containers may reference. numpy 1.x
# writes numpy.core.*, numpy 2.x numpy._core.*; both load.
ALLOWED_GLOBALS: frozenset[tuple[str, str]] = frozenset(
    [(core, "_reconstruct") for core in ("numpy.core.multiarray", "numpy._core.multiarray")]
    + [(core, "scalar") for core in ("numpy.core.multiarray", "numpy._core.multiarray")]
    + [(core, "_frombuffer") for core in ("numpy.core.numeric", "numpy._core.numeric")]
    + [("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")]
    + [(builtins, "bytes") for builtins in ("builtins", "__builtin__")]  # protocol 0
)


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only :data:`ALLOWED_GLOBALS`."""

    def __init__(self, file: BinaryIO, source: str) -> None:
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED_GLOBALS:
            return super().find_class(module, name)
        raise BenchlibError(
            f"{self.source}: refusing to unpickle {module}.{name}: only numpy arrays and plain "
            "containers (dict, list, tuple, str, int, float, bool, None) are allowed; the file "
            "is not the expected data (corrupt, replaced or malicious): delete it and download "
            "it again from a trusted source"
        )

    def persistent_load(self, pid: Any) -> Any:
        raise BenchlibError(f"{self.source}: refusing a pickle with persistent ids")


def _load_stream(stream: BinaryIO, source: str) -> Any:
    try:
        return RestrictedUnpickler(stream, source).load()
    except BenchlibError:
        raise
    except Exception as exc:  # truncated or malformed pickle data
        raise BenchlibError(
            f"{source}: not a readable pickle ({type(exc).__name__}: {exc}); the file is "
            "corrupt or truncated: delete it and download it again"
        ) from exc


def loads(data: bytes, source: str = "pickle data") -> Any:
    """Unpickle ``data`` allowing only numpy arrays and plain containers."""
    return _load_stream(io.BytesIO(data), source)


def load_pickle(path: str | Path) -> Any:
    """Load a plain pickle file, allowing only numpy arrays and plain containers."""
    path = Path(path)
    with open(path, "rb") as stream:
        return _load_stream(stream, str(path))


def load_npy(source: str | Path | BinaryIO, name: str | None = None) -> np.ndarray:
    """Load a ``.npy`` file (a path or an open binary stream) like ``np.load``; a pickled
    (object) payload goes through the restricted unpickler instead of ``allow_pickle=True``.

    A pickled dict saved with ``np.save`` comes back as a 0-d object array (``.item()`` gives
    the dict), exactly as ``np.load(path, allow_pickle=True)`` returns it. ``name`` labels a
    stream in error messages.
    """
    if isinstance(source, (str, Path)):
        with open(source, "rb") as stream:
            return _read_npy(stream, str(source))
    return _read_npy(source, name or "npy data")


def _read_npy(stream: BinaryIO, source: str) -> np.ndarray:
    from numpy.lib import format as npy_format

    try:
        version = npy_format.read_magic(stream)
        if version == (1, 0):
            header = npy_format.read_array_header_1_0(stream)
        else:  # 2.0 and 3.0 share the layout (3.0 allows a utf-8 header)
            header = npy_format.read_array_header_2_0(stream)
    except ValueError as exc:
        raise BenchlibError(
            f"{source}: not a .npy file ({exc}); the file is corrupt or not the expected data"
        ) from exc
    shape, fortran_order, dtype = header
    if dtype.hasobject:
        array = _load_stream(stream, source)
        if not isinstance(array, np.ndarray):
            raise BenchlibError(
                f"{source}: the pickled payload of this .npy file is a {type(array).__name__}, "
                "not an array; the file is not the expected data"
            )
        return array
    count = int(np.prod(shape, dtype=np.int64))
    data = stream.read(count * dtype.itemsize)
    if len(data) != count * dtype.itemsize:
        raise BenchlibError(f"{source}: the .npy file is truncated; restore it")
    array = np.frombuffer(data, dtype=dtype, count=count)
    return array.reshape(shape, order="F" if fortran_order else "C").copy()
