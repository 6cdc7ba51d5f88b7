"""``benchlib forkserver -- COMMAND``: run COMMAND with a fork server for its cells.

The server lives exactly as long as the command: it is started first, named to the command in
``BENCHLIB_FORK_SERVER``, and stopped (its running cells with it) when the command ends, so no
server outlives a run or serves code that has changed since. A wrapper killed outright (kill -9)
cannot stop it: the server then sees the end of a pipe the wrapper held, takes no more cells and
ends once its running ones have. A socket path too long for a Unix socket (a long ``$TMPDIR``)
starts no server: one line says so and every cell runs in its own process. Torch-free.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib.commands.forkserver import ENV_SOCKET
from benchlib.primitives.errors import BenchlibError

STOP_SECONDS = 30.0
MAX_SOCKET_PATH = 107  # bytes of a Unix socket path (sun_path, 108 with its NUL, on Linux)


def run_with_server(command: list[str], setting: str, threads: int = 1) -> int:
    """Run ``command`` with a fork server; its exit status (the server's fate does not change
    it: a server that fails to start leaves every cell to its own process, with a note)."""
    if not command:
        raise BenchlibError("benchlib forkserver needs a command after --, e.g. -- snakemake ...")
    if shutil.which(command[0]) is None:
        raise BenchlibError(f"{command[0]!r} is not a command on PATH")
    folder = Path(tempfile.mkdtemp(prefix="benchlib-fork-"))  # short: socket paths are capped
    socket_path = folder / "server.sock"
    alive_read, alive_write = os.pipe()  # held open while we live: the server watches it
    server = None
    if len(os.fsencode(socket_path)) > MAX_SOCKET_PATH:
        _note(
            f"the fork server's socket path {socket_path} is longer than the "
            f"{MAX_SOCKET_PATH} bytes a Unix socket allows ($TMPDIR is long; a shorter one "
            "fixes it); every cell runs in its own fresh process"
        )
    else:
        server = _start_server(socket_path, setting, threads, alive_read)
    os.close(alive_read)
    env = dict(os.environ)
    if server is not None:
        env[ENV_SOCKET] = str(socket_path)
    try:
        process = subprocess.Popen(command, env=env)
        with _forwarding_signals(process):
            return process.wait()
    finally:
        if server is not None:
            _stop_server(server)
        os.close(alive_write)
        shutil.rmtree(folder, ignore_errors=True)


def _start_server(
    socket_path: Path, setting: str, threads: int = 1, alive_fd: int | None = None
) -> subprocess.Popen | None:
    """Start a server listening on ``socket_path``; it ends on its own once ``alive_fd`` (the
    read end of a pipe the caller holds open while it lives) reaches its end."""
    read_end, write_end = os.pipe()
    started = time.monotonic()
    command = [
        sys.executable,
        "-m",
        "benchlib.commands.forkserver.server",
        "--socket",
        str(socket_path),
    ]
    command += ["--kernels", setting, "--threads", str(threads), "--ready-fd", str(write_end)]
    if alive_fd is not None:
        command += ["--parent-fd", str(alive_fd)]
    server = subprocess.Popen(
        command,
        pass_fds=[write_end] if alive_fd is None else [write_end, alive_fd],
        stdin=subprocess.DEVNULL,
    )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        line = ready.readline()  # the server writes it once it listens; EOF if it died
    if not line.startswith("ready"):
        server.wait()
        _note(
            f"the fork server did not start (exit {server.returncode}); every cell runs in its "
            "own fresh process"
        )
        return None
    _note(
        f"fork server {server.pid} is ready after {time.monotonic() - started:.1f} s "
        f"(preload {line.split()[1]} s CPU); cells fork from it"
    )
    return server


def _note(text: str) -> None:
    print(f"benchlib: {text}", file=sys.stderr, flush=True)


def _stop_server(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class _forwarding_signals:
    """While the command runs: SIGTERM and SIGHUP are passed on to it; SIGINT is ignored here,
    because Ctrl-C reaches the command itself (it is in this process group)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    def __enter__(self) -> None:
        def forward(signum: int, _frame: object) -> None:
            self.process.send_signal(signum)

        self.previous = {signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN)}
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self.previous[sig] = signal.signal(sig, forward)

    def __exit__(self, *_exc: object) -> None:
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
