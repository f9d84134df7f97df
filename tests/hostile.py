"""A hostile HTTP server on 127.0.0.1, whose misbehaviour is chosen by the first part of the URL path,
and a runner that executes the ``eaglekit`` command in a subprocess and reports its peak memory.

A plain module, not a conftest: ``from hostile import HostileServer, run_cli``. One server answers
every mode; later tests add modes to :data:`MODES` (a function of the handler and the rest of the path).

Plain-HTTP modes (``http://HOST:PORT/MODE/model.safetensors``) serve :attr:`HostileServer.files`;
the misbehaving ones answer Range requests so (requests without Range are served honestly):

=================  ===============================================================================
``static``         honest: the file, one byte range per request (206 + Content-Range), 404 if absent
``long206``        the range asked for, correct Content-Range, then endless junk (no Content-Length)
``gzip206``        206 with ``Content-Encoding: gzip``: a 64 KiB gzip that inflates to 64 MiB
``badrange``       206 whose Content-Range is 8 bytes later than the range asked for
``slow``           206 and its headers at once, then the body at one byte every 0.5 s
``silent``         reads the request and never answers (until the server stops)
``slowheaders``    the status line and headers at one byte every 0.5 s (also a Hub mode)
=================  ===============================================================================

Hub modes: use ``--endpoint http://HOST:PORT/MODE``; every Hub request arrives under ``/MODE/``.

=================  ===============================================================================
``endless404``     every request: 404 and an endless body
``links``          listings: an empty page with a ``Link: rel="next"`` to the next cursor, forever
``cycle``          listings: one entry and a next link to the same URL
``bigpage``        listings: an endless JSON array
``deep``           listings: arrays nested 100,000 deep
``notjson`` ``object`` ``ints`` ``noid``  listings that are not a list of models with ids
``treeints`` ``treenopath``  repo tree listings whose entries are not objects / have no path
``foreign``        listings: one entry and a next link to :attr:`HostileServer.elsewhere` (another
                   loopback server, set by the test, that records the headers it receives)
``hub``            an honest Hub over :attr:`HostileServer.repos` (``{"owner/name": {path: bytes}}``):
                   listings with every repo, tree, and resolve with ranges
=================  ===============================================================================

Every request is logged (:attr:`HostileServer.log`: method, path, headers). Endless bodies stop when
the client hangs up, after :data:`ENDLESS_CAP` bytes, or when the server stops.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

ENDLESS_CAP = 4 << 30  # an endless body ends here at the latest (4 GiB)
_CHUNK = 64 * 1024
_RANGE = re.compile(r"bytes=(\d+)-(\d+)")
REPO_ROOT = Path(__file__).resolve().parent.parent


def gzip_bomb(inflated: int = 64 << 20) -> bytes:
    """A gzip stream of ``inflated`` zero bytes (about 1/1000 of that on the wire)."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    return b"".join([*(z.compress(block) for _ in range(inflated >> 20)), z.flush()])


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args) -> None:
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.split("/")[1:]
        app = self.server.app
        app._record(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
        mode, rest = parts[0], "/".join(parts[1:])
        try:
            MODES.get(mode, _not_found)(self, unquote(rest), parse_qs(url.query))
        except (ConnectionError, TimeoutError):
            self.close_connection = True

    do_HEAD = do_GET

    # -- helpers for modes ------------------------------------------------------------------------
    def send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, payload: object, headers: dict | None = None) -> None:
        self.send(200, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})})

    def endless(self, status: int, headers: dict, first: bytes = b"", filler: bytes = b"x" * _CHUNK) -> None:
        """``first``, then ``filler`` repeated until the client hangs up (close-delimited body)."""
        self.send_response(status)
        for k, v in {**headers, "Connection": "close"}.items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True
        self.wfile.write(first)
        sent = len(first)
        while sent < ENDLESS_CAP and not self.server.app.stopping.is_set():
            self.wfile.write(filler)
            sent += len(filler)

    def wanted(self, size: int) -> tuple[int, int]:
        """The inclusive byte range the request asks for (the whole file without Range)."""
        m = _RANGE.fullmatch(self.headers.get("Range", ""))
        return (int(m[1]), min(int(m[2]), size - 1)) if m else (0, size - 1)

    def file(self, name: str) -> bytes | None:
        return self.server.app.files.get(name)


def _not_found(h: _Handler, rest: str, q: dict) -> None:
    h.send(404, b"not found", {"Content-Type": "text/plain"})


def _static(h: _Handler, rest: str, q: dict) -> None:
    data = h.file(rest)
    if data is None:
        return _not_found(h, rest, q)
    start, end = h.wanted(len(data))
    if start >= len(data):
        return h.send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
    ranged = "Range" in h.headers
    h.send(206 if ranged else 200, data[start:end + 1],
           {"Content-Range": f"bytes {start}-{end}/{len(data)}"} if ranged else {})


def _ranged_misbehaviour(kind: str) -> Callable:
    def mode(h: _Handler, rest: str, q: dict) -> None:
        data = h.file(rest)
        if data is None or "Range" not in h.headers:  # only range answers misbehave
            return _static(h, rest, q)
        start, end = h.wanted(len(data))
        total = len(data)
        if kind == "long206":
            return h.endless(206, {"Content-Range": f"bytes {start}-{end}/{total}"}, data[start:end + 1])
        if kind == "gzip206":
            bomb = h.server.app.bomb()
            return h.send(206, bomb, {"Content-Range": f"bytes {start}-{end}/{total}", "Content-Encoding": "gzip"})
        if kind == "badrange":
            return h.send(206, data[start:end + 1], {"Content-Range": f"bytes {start + 8}-{end + 8}/{total + 8}"})
        # slow: one byte every half second, correct headers
        body = data[start:end + 1]
        h.send_response(206)
        h.send_header("Content-Range", f"bytes {start}-{end}/{total}")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for i in range(len(body)):
            if h.server.app.stopping.wait(0.5):
                return
            h.wfile.write(body[i:i + 1])
            h.wfile.flush()
    return mode


def _slow_headers(h: _Handler, rest: str, q: dict) -> None:
    """The status line and headers at one byte every half second (a per-read timeout never fires)."""
    head = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-Filler-%d: %s\r\n" % (i, b"z" * 40) for i in range(200))
    h.close_connection = True
    for i in range(len(head)):
        if h.server.app.stopping.wait(0.5):
            return
        h.wfile.write(head[i:i + 1])
        h.wfile.flush()


def _silent(h: _Handler, rest: str, q: dict) -> None:
    h.server.app.stopping.wait(60)
    h.close_connection = True


def _is_listing(rest: str) -> bool:
    return rest.startswith("api/models")


def _listing_mode(kind: str) -> Callable:
    def mode(h: _Handler, rest: str, q: dict) -> None:
        if not _is_listing(rest):
            return h.send(404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound"})
        base = f"http://{h.headers['Host']}/{kind}/{rest}"
        cursor = int(q.get("cursor", ["0"])[-1])
        if kind == "links":
            return h.send_json([], {"Link": f'<{base}?cursor={cursor + 1}>; rel="next"'})
        if kind == "cycle":
            return h.send_json([{"id": "x/eagle3-cycle", "path": "a"}], {"Link": f'<{base}>; rel="next"'})
        if kind == "bigpage":
            return h.endless(200, {"Content-Type": "application/json"}, b"[", b'{"id": "x/y"},' * 4096)
        if kind == "deep":
            return h.send(200, b"[" * 100_000 + b"]" * 100_000, {"Content-Type": "application/json"})
        if kind == "foreign":
            return h.send_json([{"id": "x/plain", "path": "a"}],
                               {"Link": f'<{h.server.app.elsewhere}/api/models?cursor=1>; rel="next"'})
        bodies = {"notjson": b"<html>hello</html>", "object": b'{"models": []}', "ints": b"[1, 2, 3]",
                  "noid": b'[{"name": "x"}]', "treeints": b"[1, 2]", "treenopath": b'[{"type": "file"}]'}
        h.send(200, bodies[kind], {"Content-Type": "application/json"})
    return mode


def _endless404(h: _Handler, rest: str, q: dict) -> None:
    h.endless(404, {"Content-Type": "application/json"}, b'{"error": "', b"y" * _CHUNK)


def _hub(h: _Handler, rest: str, q: dict) -> None:
    """An honest (minimal) Hub over ``app.repos``."""
    repos = h.server.app.repos
    parts = rest.split("/")
    if rest == "api/models":
        return h.send_json([{"id": r, "tags": [], "downloads": 1, "likes": 0} for r in sorted(repos)])
    if parts[:2] == ["api", "models"] and len(parts) >= 6 and parts[4] == "tree":
        files = repos.get(f"{parts[2]}/{parts[3]}")
        if files is None:
            return h.send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"})
        return h.send_json([{"type": "file", "path": p, "size": len(b)} for p, b in sorted(files.items())])
    if len(parts) >= 5 and parts[2] == "resolve":
        files = repos.get(f"{parts[0]}/{parts[1]}", {})
        data = files.get("/".join(parts[4:]))
        if data is None:
            return h.send(404, b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound"})
        start, end = h.wanted(len(data))
        ranged = "Range" in h.headers
        return h.send(206 if ranged else 200, data[start:end + 1],
                      {"Content-Range": f"bytes {start}-{end}/{len(data)}"} if ranged else {})
    return _not_found(h, rest, q)


#: mode name -> handler(handler, rest of the path, query)
MODES: dict[str, Callable] = {
    "static": _static,
    **{k: _ranged_misbehaviour(k) for k in ("long206", "gzip206", "badrange", "slow")},
    "silent": _silent,
    "slowheaders": _slow_headers,
    "endless404": _endless404,
    **{k: _listing_mode(k) for k in ("links", "cycle", "bigpage", "deep", "foreign", "notjson", "object", "ints",
                                     "noid", "treeints", "treenopath")},
    "hub": _hub,
}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    app: HostileServer

    def handle_error(self, request, client_address) -> None:  # clients hang up on us: that is the point
        pass


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case


class HostileServer:
    """``with HostileServer() as s: s.url("long206/model.safetensors")``; see the module doc."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.repos: dict[str, dict[str, bytes]] = {}
        self.elsewhere: str | None = None
        self.stopping = threading.Event()
        self._log: list[Request] = []
        self._lock = threading.Lock()
        self._bomb: bytes | None = None
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.app = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def endpoint(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path: str) -> str:
        return f"{self.endpoint}/{path.lstrip('/')}"

    def bomb(self) -> bytes:
        with self._lock:
            if self._bomb is None:
                self._bomb = gzip_bomb()
            return self._bomb

    @property
    def log(self) -> list[Request]:
        with self._lock:
            return list(self._log)

    def _record(self, method: str, path: str, headers: dict) -> None:
        with self._lock:
            self._log.append(Request(method, path, headers))

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


# -- the command in a subprocess, with its peak memory ------------------------------------------------
_RUNNER = r"""
import os, sys
rc = 1
try:
    from eaglekit.cli import main
    rc = main(sys.argv[1:])
except SystemExit as e:
    rc = e.code if isinstance(e.code, int) else 1
finally:
    sys.stdout.flush()
    sys.stderr.flush()
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    with open(os.environ["EAGLEKIT_TEST_PEAK"], "w") as f:
        f.write(str(peak))
sys.exit(rc)
"""


@dataclass(frozen=True)
class CliResult:
    rc: int
    stdout: str
    stderr: str
    peak_mib: float  # the process's peak resident memory (VmHWM from /proc)
    wall_s: float

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def run_cli(*args: str, env: dict[str, str] | None = None, limit_s: float = 30, tmp: Path) -> CliResult:
    """``eaglekit ARGS`` in a fresh interpreter (HF_ENDPOINT closed, no token unless ``env`` says);
    killed after ``limit_s`` (the test then fails on its wall time)."""
    peak_file = tmp / f"peak-{time.monotonic_ns()}"
    full_env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
                "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(tmp / "hf-home"), "NO_COLOR": "1",
                "PYTHONPATH": str(REPO_ROOT), "EAGLEKIT_TEST_PEAK": str(peak_file), **(env or {})}
    full_env.pop("HF_TOKEN", None) if "HF_TOKEN" not in (env or {}) else None
    start = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", _RUNNER, *args], capture_output=True, text=True, env=full_env,
                           timeout=limit_s, cwd=tmp)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = -9, _text(e.stdout), _text(e.stderr) + f"\n[killed after {limit_s} s]"
    wall = time.monotonic() - start
    peak = int(peak_file.read_text()) / 1024 if peak_file.exists() else float("nan")
    return CliResult(rc, out, err, peak, wall)


def _text(data: bytes | str | None) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")
