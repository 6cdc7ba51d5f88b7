"""A real (minimal) FTP server on 127.0.0.1 for download tests: serves a folder to anyone who
logs in, passive mode only, and records the commands it received.

It answers what a download needs: USER, PASS, TYPE, SIZE, PASV, RETR and QUIT (any other command
gets 502). ``announce_size=False`` makes it refuse SIZE (as some servers do), so a client learns
the size only from the bytes that arrive.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
from collections.abc import Iterator
from pathlib import Path

from helpers.http_server import running


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def reply(self, line: str) -> None:
        self.wfile.write(f"{line}\r\n".encode())
        self.wfile.flush()

    def handle(self) -> None:
        passive: socket.socket | None = None
        try:
            self.reply("220 benchlib test FTP server")
            for raw in self.rfile:
                command, _, argument = raw.decode().strip().partition(" ")
                command = command.upper()
                self.server.commands.append(f"{command} {argument}".strip())
                if command == "QUIT":
                    self.reply("221 bye")
                    return
                if command == "PASV":
                    if passive is not None:
                        passive.close()
                    passive = socket.create_server(("127.0.0.1", 0))
                    passive.settimeout(10)  # a client that never connects ends the session
                    port = passive.getsockname()[1]
                    self.reply(f"227 Entering Passive Mode (127,0,0,1,{port >> 8},{port & 255})")
                elif command == "RETR":
                    self._send(argument, passive)
                    passive = None
                else:
                    self.reply(self._answer(command, argument))
        except OSError:  # the client hung up (e.g. it refused the transfer): nothing to do
            pass
        finally:
            if passive is not None:
                passive.close()

    def _answer(self, command: str, argument: str) -> str:
        replies = {"USER": "331 password please", "PASS": "230 logged in", "TYPE": "200 ok"}
        if command in replies:
            return replies[command]
        if command == "SIZE":
            path = self._file(argument)
            if not self.server.announce_size:
                return "502 SIZE not implemented"
            return f"213 {path.stat().st_size}" if path else "550 no such file"
        return "502 not implemented"

    def _file(self, argument: str) -> Path | None:
        path = self.server.root / argument.lstrip("/")
        return path if path.is_file() and self.server.root in path.resolve().parents else None

    def _send(self, argument: str, passive: socket.socket | None) -> None:
        path = self._file(argument)
        if passive is None or path is None:
            self.reply("550 no such file" if passive else "425 use PASV first")
            if passive is not None:
                passive.close()
            return
        self.reply("150 sending")
        with passive, passive.accept()[0] as data:
            try:
                data.sendall(path.read_bytes())
            except OSError:  # the client closed the data connection early
                self.reply("426 transfer aborted")
                return
        self.reply("226 done")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, root: Path, announce_size: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = root.resolve()
        self.announce_size = announce_size
        self.commands: list[str] = []


@contextlib.contextmanager
def serve_ftp(root: Path, announce_size: bool = True) -> Iterator[tuple[str, list[str]]]:
    """Serve ``root`` over FTP on an ephemeral 127.0.0.1 port; yields (base URL, commands)."""
    server = _Server(root, announce_size)
    with running(server):
        yield f"ftp://127.0.0.1:{server.server_address[1]}", server.commands
