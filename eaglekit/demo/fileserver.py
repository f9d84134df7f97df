"""A small threaded HTTP file server with byte ranges, a request log and fault injection.

On its own it is the "any HTTP server" that ``https://`` locations read from in tests and the demo:
HEAD and GET ``/files/RELPATH`` under ROOT, one byte range per request (``bytes=a-b``, ``bytes=a-``,
``bytes=-n``) answered 206 with Content-Range, no Range answered 200, an unsatisfiable one 416, with
a quoted ETag (mtime and size, as nginx makes it), Last-Modified and Accept-Ranges. A missing file is a
plain-text 404. :class:`eaglekit.demo.hubserver.HubServer` adds the Hub's endpoints on top.

For tests: ``server.log`` records every request (never a token value), ``server.ignore_range = True``
answers Range requests with 200 and the whole file as some servers do, and ``server.inject(...)``
answers the next requests to a path with a chosen status (429 with Retry-After, 503, ...), and
``server.latency = 0.05`` delays every answer by 50 ms (a distant server, for benchmarks).

Built on the standard library's ThreadingHTTPServer on purpose: a test and demo fixture must not add
a dependency, and one thread per connection is plenty on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import socket
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar
from urllib.parse import unquote, urlsplit

from eaglekit.core.errors import InputError, LocationError, NotFoundError

_RANGE_RE = re.compile(r"bytes=(\d*)-(\d*)")
_Server = TypeVar("_Server", bound="FileServer")


@dataclass(frozen=True)
class RequestRecord:
    """One request as the server answered it. Holds whether a token was sent, never the token."""

    method: str
    path: str  # as sent, percent-encoded
    query: str
    range: str | None  # the Range header as sent
    status: int
    bytes_sent: int  # body bytes written to the socket (headers not counted)
    auth: bool  # an Authorization header was sent


class HttpError(Exception):
    """An error answer: JSON ``{"error": message}`` with X-Error-Code/X-Error-Message, as the Hub
    sends them, or plain text when ``headers`` says Content-Type text/plain."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: Mapping | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, dict(headers or {})


def parse_range(value: str | None, size: int) -> tuple[int, int] | None:
    """One ``bytes=`` range as inclusive (start, end); None serves the whole file. RFC 9110 14.2: a
    malformed or multi-range header may be ignored (it is); a valid one that selects nothing is 416."""
    match = _RANGE_RE.fullmatch(value.strip()) if value else None
    if match is None or match[1] == match[2] == "":
        return None
    if match[1] == "":  # suffix range: the last n bytes ("bytes=-0" selects nothing)
        start, end = (max(size - int(match[2]), 0) if int(match[2]) else size), size - 1
    else:
        start, end = int(match[1]), int(match[2]) if match[2] else size - 1
        if match[2] and end < start:  # "bytes=9-3" is invalid, hence ignored
            return None
    if start >= size:
        raise HttpError(416, "Requested Range Not Satisfiable", headers={"Content-Range": f"bytes */{size}"})
    return start, min(end, size - 1)


class _HTTPServer(ThreadingHTTPServer):
    """Remembers its open connections, so stop() can close idle keep-alive ones."""

    daemon_threads = True
    app: FileServer  # the server object this socket server answers for

    def handle_error(self, request, client_address) -> None:
        """A client hanging up mid-answer (as eaglekit does to a server that ignores Range) is normal."""
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.connections: set[socket.socket] = set()
        super().__init__(address, handler)

    def process_request(self, request, client_address) -> None:
        self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        self.connections.discard(request)
        super().shutdown_request(request)


class FileHandler(BaseHTTPRequestHandler):
    """Answers one connection; subclasses extend :meth:`_route`."""

    protocol_version = "HTTP/1.1"  # keep-alive, as pooled client connections expect
    server_version = "eaglekit-fileserver"
    timeout = 60  # an idle keep-alive connection frees its thread after this
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and a small body leave in separate writes: with Nagle's algorithm on, the second waits
        # for the client's delayed ACK (about 40 ms) on every small answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle()

    do_HEAD = do_POST = do_GET

    def log_message(self, format: str, *args) -> None:  # the request line only: tokens travel in headers
        if not self.server.app.quiet:
            super().log_message(format, *args)

    def _handle(self) -> None:
        app, url = self.server.app, urlsplit(self.path)
        self._status = self._sent = 0
        arrival = app._begin()
        try:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not app.host_ok(self.headers.get("Host")):  # DNS rebinding: a page's name for 127.0.0.1
                raise HttpError(421, "Misdirected request: unknown Host header",
                                headers={"Content-Type": "text/plain"})
            if app.latency:  # an emulated network round trip (benchmarks): loopback has none
                time.sleep(app.latency)
            if fault := app._take_fault(unquote(url.path)):
                raise HttpError(fault[0], f"Injected fault: HTTP {fault[0]}", headers=fault[1])
            self._route(url.path, url.query, body)
        except HttpError as e:
            self._send_error(e)
        except ConnectionError:
            self.close_connection = True
        except Exception as e:  # a fixture bug or bad metadata: answer 500, not a dropped connection
            if self._status:
                self.close_connection = True
            else:
                self._send_error(HttpError(500, f"{type(e).__name__}: {e}"))
        finally:
            app._end(arrival, RequestRecord(self.command, url.path, url.query, self.headers.get("Range"),
                                   self._status, self._sent, "Authorization" in self.headers))

    def _route(self, path: str, query: str, body: bytes) -> None:
        if path.startswith("/files/"):
            return self._static(unquote(path[len("/files/"):]))
        raise HttpError(404, "Not Found", headers={"Content-Type": "text/plain"})

    def _static(self, rel: str) -> None:
        """A file under ROOT; hidden names and paths leaving ROOT (.., symlinks) are 404."""
        self._need("GET", "HEAD")
        root = self.server.app.root.resolve()
        not_found = HttpError(404, "Not Found", headers={"Content-Type": "text/plain"})
        if any(not part or part.startswith(".") for part in rel.split("/")):
            raise not_found
        try:
            path = root.joinpath(*rel.split("/")).resolve(strict=True)
            st = path.stat()
        except OSError as e:
            raise not_found from e
        if not path.is_relative_to(root) or not stat.S_ISREG(st.st_mode):
            raise not_found
        etag = f'"{st.st_mtime_ns:x}-{st.st_size:x}"'
        self._send_file(path, st.st_size, {"ETag": etag, "Last-Modified": formatdate(st.st_mtime, usegmt=True)})

    def _need(self, *methods: str) -> None:
        if self.command not in methods:
            raise HttpError(405, f"Method {self.command} not allowed here", headers={"Allow": ", ".join(methods)})

    def _send_file(self, path: Path, size: int, headers: Mapping) -> None:
        """The file, or the one byte range asked for, with exact Content-Length."""
        span = None if self.server.app.ignore_range else parse_range(self.headers.get("Range"), size)
        start, end = span or (0, size - 1)
        headers = {**headers, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                   "Content-Length": str(end - start + 1)}
        if span:
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        self._start(206 if span else 200, headers)
        if self.command == "HEAD":
            return
        left = end - start + 1
        with open(path, "rb") as f:
            # sendfile(2): the kernel sends from the page cache; no 1 MiB pieces read into Python and
            # written back out (benchmarks/RESULTS.md, issue 25).
            sent = self.connection.sendfile(f, start, left)
        self._sent += sent
        self.close_connection = self.close_connection or sent < left  # the file shrank: the length was wrong

    def _send_json(self, payload: object, headers: Mapping | None = None) -> None:
        self._send(200, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

    def _send_error(self, e: HttpError) -> None:
        headers = {"Content-Type": "application/json", **e.headers}
        if headers["Content-Type"] == "text/plain":
            return self._send(e.status, e.message.encode(), headers)
        headers["X-Error-Message"] = e.message.encode("ascii", "backslashreplace").decode()
        headers.update({"X-Error-Code": e.code} if e.code else {})
        self._send(e.status, json.dumps({"error": e.message}).encode(), headers)

    def _send(self, status: int, body: bytes, headers: Mapping) -> None:
        self._start(status, {**headers, "Content-Length": str(len(body))})
        if self.command != "HEAD":
            self._write(body)

    def _start(self, status: int, headers: Mapping) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        self._status = status

    def _write(self, data: bytes) -> None:
        self.wfile.write(data)
        self._sent += len(data)


class FileServer:
    """Serves ``root`` under ``/files/`` on ``host:port`` (0 picks a free port); see the module doc.

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    handler: type[FileHandler] = FileHandler

    def __init__(self, root: str | Path, *, host: str = "127.0.0.1", port: int = 0, quiet: bool = True) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise NotFoundError(f"Cannot serve {self.root}: it is not a folder.")
        self.quiet = quiet
        self.ignore_range = False
        #: Seconds every answer is delayed by, emulating a round trip to a distant server (benchmarks).
        self.latency = 0.0
        self._address = (host, port)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._cond = threading.Condition()
        self._records: list[tuple[int, RequestRecord]] = []  # (arrival number, record)
        self._arrivals = 0
        self._faults: list[list] = []  # [path_prefix, status, headers, times left]
        self._busy = 0  # requests being answered

    @property
    def endpoint(self) -> str:
        """``http://HOST:PORT`` of the running server."""
        if self._httpd is None:
            raise InputError(f"{type(self).__name__} is not running: call start() or use it in a `with` block.")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self: _Server) -> _Server:
        if self._httpd is None:
            try:
                self._httpd = _HTTPServer(self._address, self.handler)
            except OSError as e:
                raise LocationError(f"Cannot listen on {self._address[0]}:{self._address[1]} ({e.strerror}); "
                                    "choose another port.") from e
            self._httpd.app = self
            self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True,
                                            name=f"{type(self).__name__}-{self._httpd.server_address[1]}")
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and close open keep-alive connections."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        for conn in list(httpd.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join()

    def __enter__(self: _Server) -> _Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def host_ok(self, host: str | None) -> bool:
        """Whether a request's Host header names this server: its address, localhost or a loopback
        address with its port (any name when listening on all interfaces; none sent is accepted, as
        HTTP/1.0 allows). Refusing other names stops a web page from reaching the server through a
        DNS name it rebinds to 127.0.0.1."""
        if host is None or self._httpd is None:
            return True
        bound, port = self._httpd.server_address[:2]
        if bound in ("0.0.0.0", "::", ""):
            return True
        names = {bound, f"[{bound}]", "localhost", "127.0.0.1", "[::1]"}
        return host.strip().lower() in {f"{n}:{port}" for n in names} | ({*names} if port == 80 else set())

    def inject(self, path_prefix: str, status: int, headers: Mapping[str, str] | None = None, times: int = 1) -> None:
        """Answer the next ``times`` requests whose decoded path starts with ``path_prefix`` with
        ``status`` and ``headers`` (e.g. ``{"Retry-After": "17"}``) instead of serving them."""
        if times < 1:
            raise InputError(f"times must be at least 1, got {times}.")
        with self._cond:
            self._faults.append([path_prefix, status, dict(headers or {}), times])

    @property
    def log(self) -> list[RequestRecord]:
        """The requests answered so far, in the order they arrived (a copy). Waits (up to 5 s) for
        requests in flight, so a response the client already holds is always in the log. Records are
        ordered by arrival, not completion: a handler thread may finish logging after the client has
        read its answer and sent the next request on another connection."""
        with self._cond:
            self._cond.wait_for(lambda: self._busy == 0, timeout=5)
            return [record for _, record in sorted(self._records, key=lambda item: item[0])]

    def clear_log(self) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._busy == 0, timeout=5)
            self._records.clear()

    def _take_fault(self, path: str) -> tuple[int, dict] | None:
        with self._cond:
            for fault in self._faults:
                if path.startswith(fault[0]):
                    fault[3] -= 1
                    if fault[3] == 0:
                        self._faults.remove(fault)
                    return fault[1], fault[2]
        return None

    def _begin(self) -> int:
        with self._cond:
            self._busy += 1
            self._arrivals += 1
            return self._arrivals

    def _end(self, arrival: int, record: RequestRecord) -> None:
        with self._cond:
            self._records.append((arrival, record))
            self._busy -= 1
            self._cond.notify_all()
