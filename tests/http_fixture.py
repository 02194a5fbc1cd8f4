"""A real HTTP server on 127.0.0.1 for the download tests, with Range support and scripted faults.

``server.files[path] = bytes`` publishes a file; ``server.faults[path] = [...]`` scripts
the next responses of that path, one fault per request:

* ``"404"``, ``"500"`` — that status;
* ``("drop", n)`` — headers promising the whole body, then ``n`` bytes and a closed connection;
* ``"ignore_range"`` — answer 200 with the whole file even when a Range was asked.

``server.requests`` records ``(path, range_header)`` of every request.
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):          # keep pytest output clean
        pass

    def do_GET(self):                      # noqa: N802 (http.server's naming)
        srv = self.server.owner
        rng = self.headers.get("Range")
        srv.requests.append((self.path, rng))
        queue = srv.faults.get(self.path) or []
        fault = queue.pop(0) if queue else None
        body = srv.files.get(self.path)
        if fault in ("404", "500") or body is None:
            code = 404 if body is None or fault == "404" else 500
            self.send_response(code)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        start = 0
        if rng and fault != "ignore_range":
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        else:
            self.send_response(200)
        payload = body[start:]
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if isinstance(fault, tuple) and fault[0] == "drop":
            self.wfile.write(payload[: fault[1]])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        srv.bytes_sent += len(payload)
        self.wfile.write(payload)


class FileServer:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.faults: dict[str, list] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.bytes_sent = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return self.base + path

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()
