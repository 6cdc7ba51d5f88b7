"""The fork server: preload the engine once, then fork a child for each cell a client sends.

It runs as ``python -m benchlib.commands.forkserver.server --socket PATH --kernels SETTING
--ready-fd N``, started by :mod:`benchlib.commands.forkserver.wrapper`. It is one thread, so a fork
copies no lock that another thread holds, and it never runs a tensor operation that would start an
OpenMP pool or initialise CUDA before it forks. A child's end is reported to its client with the
child's CPU time; a client that goes away (killed) takes its child with it.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import selectors
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass, field

from benchlib.commands.forkserver import ENV_FORKED, ENV_SOCKET, protocol
from benchlib.primitives import cpu_kernels

_PARENT = "parent"  # the selector key of the wrapper's pipe
KILL_GRACE_SECONDS = 10.0  # after SIGTERM, a child that has not exited gets SIGKILL
REQUEST_TIMEOUT_SECONDS = 30.0  # a client sends its request as soon as it connects


def preload() -> None:
    """Import what every cell imports, so that a child starts warm."""
    import torch

    # The first optimizer imports TorchDynamo (PyTorch wraps add_param_group with it). A
    # one-element parameter runs no parallel region, so no OpenMP threads exist at fork time.
    torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)


@dataclass
class Child:
    pid: int
    conn: socket.socket
    started: float = field(default_factory=time.monotonic)
    kill_at: float | None = None


class Server:
    """One listening socket and the children it has forked, driven by one selector loop."""

    def __init__(self, path: str, setting: str, parent_fd: int | None = None) -> None:
        self.path = path
        self.parent_fd = parent_fd
        self.fingerprint = protocol.fingerprint(setting)
        self.children: dict[int, Child] = {}
        self.selector = selectors.DefaultSelector()
        self.stopping = False
        self.stop_requested = False
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)  # the socket is its owner's only
        try:
            self.listener.bind(path)
        finally:
            os.umask(old_umask)
        self.listener.listen(64)
        self.selector.register(self.listener, selectors.EVENT_READ, None)
        if parent_fd is not None:  # end of file there: the wrapper is gone (even kill -9)
            self.selector.register(parent_fd, selectors.EVENT_READ, _PARENT)

    def serve(self) -> None:
        while not (self.stopping and not self.children):
            if self.stop_requested and not self.stopping:
                self._stop_now()
            for key, _events in self.selector.select(timeout=0.1):
                if key.data is None:
                    self._accept()
                elif key.data is _PARENT:
                    self._orphaned()
                else:
                    self._from_client(key.data)
            self._reap()
            self._enforce_kills()
        self.selector.close()
        self.listener.close()

    def stop(self, *_args: object) -> None:
        """The SIGTERM handler: the loop stops at its next turn (a handler must not touch the
        selector that the loop may be iterating over)."""
        self.stop_requested = True

    def _orphaned(self) -> None:
        """The wrapper died without stopping us: take no more cells (new clients run their
        cells in their own process), let the running ones finish, then end."""
        log("the wrapper that started this server is gone; ending once its cells have")
        self.selector.unregister(self.parent_fd)
        if not self.stopping:
            self.stopping = True
            self.selector.unregister(self.listener)
            self.listener.close()
            with contextlib.suppress(OSError):
                os.unlink(self.path)
                os.rmdir(os.path.dirname(self.path))  # the wrapper's folder, had it for us

    def _stop_now(self) -> None:
        """Take no more cells; end the running ones (SIGTERM, then SIGKILL)."""
        if not self.stopping:
            self.stopping = True
            self.selector.unregister(self.listener)
        for child in self.children.values():
            self._signal(child, signal.SIGTERM)

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(REQUEST_TIMEOUT_SECONDS)
        try:
            request, fds = protocol.receive(conn, with_fds=3)
        except (OSError, ValueError) as exc:
            log(f"dropped a client whose request could not be read: {exc}")
            conn.close()
            return
        try:
            if request is None or len(fds) != 3:
                conn.close()
                return
            reason = protocol.request_problem(request)
            if reason is not None:
                log(f"refused a malformed request: {reason}")
            else:
                reason = protocol.mismatch(self.fingerprint, request["fingerprint"])
            if reason is not None:
                with contextlib.suppress(OSError):  # a client that is gone needs no answer
                    protocol.send(conn, {"refused": reason})
                conn.close()
                return
            pid = self._fork(conn, request, fds)
        finally:
            for fd in fds:
                os.close(fd)
        child = Child(pid, conn)
        self.children[pid] = child  # reaped by the loop, whatever happens to its client
        try:
            conn.settimeout(None)
            protocol.send(conn, {"started": pid})
        except OSError:  # the client died right after sending: its cell goes too
            log(f"client of cell process {pid} went away before it started; ending the cell")
            self._signal(child, signal.SIGKILL)
            return
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def _fork(self, conn: socket.socket, request: dict, fds: list[int]) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child never returns from here
            code = 70
            try:
                self._become_cell(conn, request, fds)
                code = run_cell_command(request["argv"])
            except BaseException:  # the child must end in os._exit, whatever happens
                traceback.print_exc()
            finally:
                finish_child(code)
        return pid

    def _become_cell(self, conn: socket.socket, request: dict, fds: list[int]) -> None:
        """Drop the server's state and take on the client's streams, folder and environment."""
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        self.selector.close()
        self.listener.close()
        if self.parent_fd is not None:
            os.close(self.parent_fd)
        conn.close()
        for child in self.children.values():
            child.conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        os.environ.pop(ENV_SOCKET, None)
        os.environ[ENV_FORKED] = str(os.getppid())
        logging.root.handlers.clear()  # the cell's main() configures logging afresh

    def _from_client(self, pid: int) -> None:
        child = self.children[pid]
        try:
            message, _ = protocol.receive(child.conn)
        except (OSError, ValueError):
            message = None
        if message is None:  # the client is gone (killed): its cell goes too
            self.selector.unregister(child.conn)
            self._signal(child, signal.SIGKILL)
            return
        sig = message.get("signal")
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._signal(child, signal.Signals(sig))

    def _signal(self, child: Child, sig: signal.Signals) -> None:
        try:
            os.kill(child.pid, sig)
        except ProcessLookupError:
            return
        if sig != signal.SIGKILL and child.kill_at is None:
            child.kill_at = time.monotonic() + KILL_GRACE_SECONDS

    def _enforce_kills(self) -> None:
        now = time.monotonic()
        for child in self.children.values():
            if child.kill_at is not None and now >= child.kill_at:
                self._signal(child, signal.SIGKILL)
                child.kill_at = None

    def _reap(self) -> None:
        for pid in list(self.children):
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done == 0:
                continue
            child = self.children.pop(pid)
            report = {
                "exit": os.waitstatus_to_exitcode(status),
                "cpu_seconds": usage.ru_utime + usage.ru_stime,
                "wall_seconds": time.monotonic() - child.started,
            }
            with contextlib.suppress(KeyError, ValueError):  # its client went away first
                self.selector.unregister(child.conn)
            with contextlib.suppress(OSError):  # the client is gone; nobody waits for this
                protocol.send(child.conn, report)
            child.conn.close()


def run_cell_command(argv: list[str]) -> int:
    """Run one ``benchlib`` command line in this (forked) process; its exit status."""
    from benchlib.commands.cli import main

    try:
        return main(argv)
    except SystemExit as exc:  # argparse and sys.exit
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT


def finish_child(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def log(text: str) -> None:
    print(f"benchlib fork server [{os.getpid()}]: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchlib.commands.forkserver.server")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--kernels", default=cpu_kernels.DEFAULT, choices=cpu_kernels.SETTINGS)
    parser.add_argument("--threads", type=int, default=1, help="the cells' threads (Snakemake's)")
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument(
        "--parent-fd", type=int, default=None, help="a pipe the wrapper holds open while it lives"
    )
    args = parser.parse_args(argv)
    os.environ.update(dict.fromkeys(protocol.THREAD_ENV, str(args.threads)))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the wrapper stops us (SIGTERM) after its command
    cpu_kernels.apply(args.kernels)
    started = time.process_time()
    preload()
    import torch

    if torch.cuda.is_initialized():  # a forked child could not use CUDA: serve nothing
        log("CUDA was initialised while preloading; not serving (cells run in their own process)")
        return 1
    try:
        server = Server(args.socket, args.kernels, args.parent_fd)
    except OSError as exc:  # e.g. a socket path longer than the system allows
        log(f"cannot listen on {args.socket} ({exc}); not serving")
        return 1
    signal.signal(signal.SIGTERM, server.stop)
    signal.signal(signal.SIGHUP, server.stop)
    with os.fdopen(args.ready_fd, "w") as ready:  # the wrapper waits for this line
        ready.write(f"ready {time.process_time() - started:.2f}\n")
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
