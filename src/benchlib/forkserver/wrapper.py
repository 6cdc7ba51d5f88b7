"""``benchlib forkserver -- COMMAND``: run COMMAND with a fork server for its cells.

The server lives exactly as long as the command: it is started first, named to the command in
``BENCHLIB_FORK_SERVER``, and stopped (its running cells with it) when the command ends, so no
server outlives a run or serves code that has changed since. Torch-free.
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

from benchlib.errors import BenchlibError
from benchlib.forkserver import ENV_SOCKET

STOP_SECONDS = 30.0


def run_with_server(command: list[str], setting: str, threads: int = 1) -> int:
    """Run ``command`` with a fork server; its exit status (the server's fate does not change
    it: a server that fails to start leaves every cell to its own process, with a note)."""
    if not command:
        raise BenchlibError("benchlib forkserver needs a command after --, e.g. -- snakemake ...")
    if shutil.which(command[0]) is None:
        raise BenchlibError(f"{command[0]!r} is not a command on PATH")
    folder = Path(tempfile.mkdtemp(prefix="benchlib-fork-"))  # short: socket paths are capped
    socket_path = folder / "server.sock"
    server = _start_server(socket_path, setting, threads)
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
        shutil.rmtree(folder, ignore_errors=True)


def _start_server(socket_path: Path, setting: str, threads: int = 1) -> subprocess.Popen | None:
    read_end, write_end = os.pipe()
    started = time.monotonic()
    command = [sys.executable, "-m", "benchlib.forkserver.server", "--socket", str(socket_path)]
    command += ["--kernels", setting, "--threads", str(threads), "--ready-fd", str(write_end)]
    server = subprocess.Popen(
        command,
        pass_fds=[write_end],
        stdin=subprocess.DEVNULL,
    )
    os.close(write_end)
    with os.fdopen(read_end) as ready:
        line = ready.readline()  # the server writes it once it listens; EOF if it died
    if not line.startswith("ready"):
        server.wait()
        print(
            f"benchlib: the fork server did not start (exit {server.returncode}); every cell "
            "runs in its own fresh process",
            file=sys.stderr,
        )
        return None
    print(
        f"benchlib: fork server {server.pid} is ready after {time.monotonic() - started:.1f} s "
        f"(preload {line.split()[1]} s CPU); cells fork from it",
        file=sys.stderr,
    )
    return server


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
