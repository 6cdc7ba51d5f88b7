"""A real HTTP server on 127.0.0.1 for download tests: serves a folder and records the requests."""

from __future__ import annotations

import contextlib
import functools
import http.server
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves a folder; ``/truncated/<name>`` announces the full length but sends half;
    ``/redirect-to-file/<name>`` redirects to a ``file://`` URL; ``/no-length/<name>`` sends
    the file without a Content-Length."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        if self.path.startswith("/no-length/"):  # no Content-Length: the size is learnt late
            data = (Path(self.directory) / self.path.split("/")[-1]).read_bytes()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path.startswith("/redirect-to-file/"):  # a redirect off HTTP, to a local file
            self.send_response(302)
            self.send_header("Location", "file:///etc/hostname")
            self.end_headers()
            return
        if self.path.startswith("/truncated/"):
            data = (Path(self.directory) / self.path.split("/")[-1]).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@contextlib.contextmanager
def serve_directory(root: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``root`` on an ephemeral 127.0.0.1 port; yields (base URL, requested paths)."""
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(root))
    )
    server.requests = []
    with running(server):
        yield f"http://127.0.0.1:{server.server_address[1]}", server.requests


@contextlib.contextmanager
def running(server: socketserver.BaseServer) -> Iterator[None]:
    """``server`` serving from a daemon thread for the ``with`` block, then shut and closed."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
