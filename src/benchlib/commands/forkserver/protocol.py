"""What the fork server and its clients say to each other, and what must match between them.

Messages are JSON objects, each sent as a 4-byte big-endian length and the UTF-8 text. The
client's request carries its standard streams as file descriptors (``SCM_RIGHTS``). Torch-free.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from typing import Any

from benchlib.primitives import cpu_kernels

_LENGTH = struct.Struct(">I")
MAX_MESSAGE = 1 << 22  # 4 MiB: a request's environment and arguments fit many times over

# Thread counts that OpenMP, MKL and OpenBLAS read when they load. Snakemake sets each of them to
# a job's `threads` (its shell environment), so the server loads with the count its cells run with.
THREAD_ENV = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# Everything libraries read once, when torch or numpy load: the server has read them before it
# forked, so a child runs with the server's values, whatever its own environment says.
IMPORT_TIME_ENV = (
    *cpu_kernels.PORTABLE_ENV,
    *THREAD_ENV,
    "KMP_AFFINITY",
    "GOMP_CPU_AFFINITY",
    "LD_PRELOAD",
    "PYTHONHASHSEED",
)


def fingerprint(setting: str) -> dict[str, Any]:
    """What a process fixes when torch loads under CPU-kernel ``setting``: the same in the
    server and in a client, or the client's cell would compute with other kernels."""
    import benchlib

    return {
        "python": sys.executable,
        "benchlib": os.path.dirname(os.path.abspath(benchlib.__file__)),
        "cpu_kernels": setting,
        "env": {name: os.environ.get(name) for name in IMPORT_TIME_ENV},
    }


def mismatch(ours: dict[str, Any], theirs: dict[str, Any]) -> str | None:
    """The first difference between two fingerprints, in words, or None."""
    for key in ("python", "benchlib", "cpu_kernels"):
        if ours.get(key) != theirs.get(key):
            return f"{key} differs (server {ours.get(key)!r}, cell {theirs.get(key)!r})"
    for name in IMPORT_TIME_ENV:
        mine, other = ours["env"].get(name), theirs.get("env", {}).get(name)
        if mine != other:
            return f"${name} differs (server {mine!r}, cell {other!r})"
    return None


def encode(message: dict[str, Any]) -> bytes:
    data = json.dumps(message).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"fork-server message of {len(data)} bytes is over {MAX_MESSAGE}")
    return _LENGTH.pack(len(data)) + data


def send(sock: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """Send one message; ``fds`` travel with its first bytes."""
    data = encode(message)
    sent = socket.send_fds(sock, [data], fds) if fds else 0
    if sent < len(data):  # never an empty send: to a peer that has already answered and
        sock.sendall(data[sent:])  # closed (a refusal), even that fails with EPIPE


def _read_exactly(sock: socket.socket, size: int, head: bytes = b"") -> bytes | None:
    chunks, have = [head], len(head)
    while have < size:
        chunk = sock.recv(min(size - have, 1 << 16))
        if not chunk:
            return None
        chunks.append(chunk)
        have += len(chunk)
    return b"".join(chunks)


def receive(sock: socket.socket, with_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message and the file descriptors sent with it; (None, []) at end of stream."""
    fds: list[int] = []
    if with_fds:
        head, fds, _flags, _addr = socket.recv_fds(sock, _LENGTH.size, with_fds)
    else:
        head = sock.recv(_LENGTH.size)
    if not head:
        return None, fds
    prefix = _read_exactly(sock, _LENGTH.size, head)
    if prefix is None:
        return None, fds
    (size,) = _LENGTH.unpack(prefix)
    if size > MAX_MESSAGE:
        raise ValueError(f"fork-server message of {size} bytes is over {MAX_MESSAGE}")
    body = _read_exactly(sock, size)
    if body is None:
        return None, fds
    try:
        return json.loads(body.decode("utf-8")), fds
    except RecursionError as exc:  # JSON nested 100,000 deep: not a message of ours
        raise ValueError("fork-server message nests too deeply") from exc


def request_problem(request: Any) -> str | None:
    """What makes ``request`` not a cell request a server can fork (argv, cwd, env and
    fingerprint, each of its type), or None."""
    if not isinstance(request, dict):
        return f"the request is a JSON {type(request).__name__}, not an object"
    argv, cwd, env = request.get("argv"), request.get("cwd"), request.get("env")
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return "argv is not a list of strings"
    if not isinstance(cwd, str) or not os.path.isdir(cwd):
        return "cwd is not an existing folder"
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\0" not in k + v
        for k, v in env.items()
    ):
        return "env is not a mapping of variable names to strings"
    fingerprint = request.get("fingerprint")
    if not isinstance(fingerprint, dict) or not isinstance(fingerprint.get("env", {}), dict):
        return "fingerprint is not an object"
    return None
