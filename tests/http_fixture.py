"""A real HTTP server on 127.0.0.1 for the download tests, with Range support and scripted faults.

``server.files[path] = bytes`` publishes a file (assign new bytes to change it "upstream");
every answer carries a strong ``ETag`` and a ``Last-Modified`` derived from the content, and a
``Range`` request with an ``If-Range`` that no longer matches gets the whole file (200), as
RFC 9110 asks.  ``server.faults[path] = [...]`` scripts the next responses of that path, one
fault per request:

* ``"404"``, ``"500"`` -- that status;
* ``("drop", n)`` -- headers promising the whole body, then ``n`` bytes and a closed connection;
* ``("truncate", n)`` -- no Content-Length, ``n`` bytes, then a closed connection (the client
  cannot tell the body is cut short);
* ``"html"`` -- 200 with a captive portal's HTML page instead of the file;
* ``"416"`` -- ``416 Range Not Satisfiable`` whatever the range;
* ``"ignore_range"`` -- answer 200 with the whole file even when a Range was asked;
* ``"ignore_if_range"`` -- honour the Range even when the If-Range no longer matches;
* ``"no_validators"`` -- no ETag and no Last-Modified in the answer.

``server.requests`` records ``(path, range_header)`` of every request, ``server.if_ranges``
the ``If-Range`` header of each (``None`` when absent).
"""

from __future__ import annotations

import hashlib
import socket
import threading
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTAL = (b"<!DOCTYPE html>\n<html><head><title>Welcome to Hotel WiFi</title></head>\n"
          b"<body><form action=\"/login\"><p>Please accept the terms to continue.</p></form></body></html>\n")


def validators(body: bytes) -> tuple[str, str]:
    """(ETag, Last-Modified) the fixture sends for ``body``."""
    digest = hashlib.sha256(body).hexdigest()
    return f'"{digest[:16]}"', formatdate(1_600_000_000 + int(digest[:5], 16), usegmt=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):          # keep pytest output clean
        pass

    def do_GET(self):                      # noqa: N802 (http.server's naming)
        srv = self.server.owner
        rng, if_range = self.headers.get("Range"), self.headers.get("If-Range")
        srv.requests.append((self.path, rng))
        srv.if_ranges.append(if_range)
        queue = srv.faults.get(self.path) or []
        fault = queue.pop(0) if queue else None
        body = srv.files.get(self.path)
        if fault in ("404", "500") or body is None:
            code = 404 if body is None or fault == "404" else 500
            self._empty(code)
            return
        if fault == "html":
            self._send(200, PORTAL, {"Content-Type": "text/html; charset=utf-8"})
            return
        etag, modified = validators(body)
        extra = {} if fault == "no_validators" else {"ETag": etag, "Last-Modified": modified}
        if fault == "416":
            self._empty(416, {"Content-Range": f"bytes */{len(body)}", **extra})
            return
        honour = rng and fault != "ignore_range" and (
            if_range is None or if_range in (etag, modified) or fault == "ignore_if_range")
        start, code = 0, 200
        if honour:
            start = int(rng.split("=")[1].split("-")[0])
            if start >= len(body):
                self._empty(416, {"Content-Range": f"bytes */{len(body)}", **extra})
                return
            code = 206
            extra["Content-Range"] = f"bytes {start}-{len(body) - 1}/{len(body)}"
        payload = body[start:]
        if isinstance(fault, tuple) and fault[0] == "truncate":
            self._send(code, payload[: fault[1]], extra, length=False)
            return
        if isinstance(fault, tuple) and fault[0] == "drop":
            self._send(code, payload[: fault[1]], extra, length=True, promised=len(payload))
            return
        srv.bytes_sent += len(payload)
        self._send(code, payload, extra)

    def _empty(self, code, headers=None):
        self._send(code, b"", headers or {})

    def _send(self, code, payload, headers, length=True, promised=None):
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        if length:
            self.send_header("Content-Length", str(len(payload) if promised is None else promised))
        else:
            self.send_header("Connection", "close")
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        self.wfile.write(payload)
        if not length or promised is not None:
            # a connection closed early: with no Content-Length the client cannot tell
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True


class FileServer:
    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.faults: dict[str, list] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.if_ranges: list[str | None] = []
        self.bytes_sent = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._httpd.daemon_threads = True
        # a short poll interval: shutdown() waits for it, at the end of every test
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        daemon=True)

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
