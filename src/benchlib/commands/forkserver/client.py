"""The client side: ``benchlib run`` hands its cell to the fork server when one is running.

:func:`delegate` returns the cell's exit status, or None when the cell must run in this
process: no server named, the server unreachable or refusing (its import-time settings differ).
Each of those says why in one line on stderr, except "no server named". Torch-free.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
from pathlib import Path
from types import FrameType

from benchlib.commands.forkserver import ENV_SOCKET, protocol
from benchlib.primitives import cpu_kernels

_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def spec_kernels(text: str) -> str | None:
    """The one field the client needs from a cell spec's JSON (``benchlib run --spec``, inline
    or ``@path``): ``training.cpu_kernels``. None when the text is no such JSON or names no
    known setting: the cell then runs in this process, where ``benchlib run`` checks the whole
    spec and names the problem. Builds and checks nothing else."""
    try:
        if text.startswith("@"):
            text = Path(text[1:]).read_text(encoding="utf-8")
        spec = json.loads(text)
    except (OSError, ValueError, RecursionError):  # ValueError: also bad UTF-8
        return None
    training = spec.get("training") if isinstance(spec, dict) else None
    setting = training.get("cpu_kernels") if isinstance(training, dict) else None
    return setting if setting in cpu_kernels.SETTINGS else None


def delegate(argv: list[str], setting: str) -> int | None:
    """Run ``benchlib argv`` in a child of the fork server; its exit status, or None."""
    path = os.environ.get(ENV_SOCKET)
    if not path:
        return None
    # The kernels this cell needs, set as a fresh process would before torch loads (they stay
    # set if the cell falls back to this process).
    cpu_kernels.apply(setting)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
        request = {
            "argv": argv,
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "fingerprint": protocol.fingerprint(setting),
        }
        sys.stdout.flush()
        sys.stderr.flush()
        protocol.send(sock, request, fds=[0, 1, 2])
        answer, _ = protocol.receive(sock)
    except (OSError, ValueError) as exc:
        sock.close()
        _note(f"fork server {path} not reachable ({exc}); the cell runs in this process")
        return None
    if answer is None or "started" not in answer:
        sock.close()
        reason = answer.get("refused") if answer else "it closed the connection"
        _note(f"fork server {path} refused the cell ({reason}); it runs in this process")
        return None
    return _wait(sock, int(answer["started"]))


def _wait(sock: socket.socket, pid: int) -> int:
    """Forward signals to the child until the server reports its end."""

    def forward(signum: int, _frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            protocol.send(sock, {"signal": signum})

    previous = {sig: signal.signal(sig, forward) for sig in _FORWARDED}
    try:
        report, _ = protocol.receive(sock)  # a forwarded signal interrupts it; PEP 475 resumes
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    if report is None:
        _note(f"the fork server ended before cell process {pid} did; the cell did not finish")
        return 1
    code = int(report["exit"])
    _note(
        f"cell process {pid} (forked from a warm server) took {report['cpu_seconds']:.1f} s "
        f"CPU, {report['wall_seconds']:.1f} s wall"
    )
    return 128 - code if code < 0 else code  # killed by signal N: 128 + N, as a shell says


def _note(text: str) -> None:
    print(f"benchlib: {text}", file=sys.stderr, flush=True)
