"""The socket path of :func:`~eaglekit.io.sources.http.range_get`: large range bodies received straight
into the caller's buffer.

httpx hands a response body to Python 64 KiB at a time, each piece through h11's parser and several
generator layers, then copied into the destination. For a header that is nothing; for the gigabytes of a
similarity or drift pass it was most of the client's CPU (0.45 s per GB in one thread on a quiet core,
about 0.9 s per GB inside a comparison, whose reader threads compete with the compute for the GIL). Here
the same request goes out on a plain socket (TLS with the client's own SSL context), the status line and
headers are read into a bounded buffer, and the body is received with ``socket.recv_into`` straight into
the destination: one copy (kernel to buffer), a few Python calls per MiB, the GIL released while the
kernel copies (0.25-0.3 s per GB inside a comparison; benchmarks/RESULTS.md).

The request is the one httpx would send: built by the client itself (``client.build_request``: its default
headers and cookies; the URL's user:password becomes Basic auth as in httpx) and passed through its
request hooks (huggingface_hub's: offline mode, request id). Only clients that would connect straight to
the server take this path: the standard transport, no proxy, no custom auth (:func:`ssl_context_for`).

This module only transports: :func:`~eaglekit.io.sources.http.range_get` checks the answer (status,
Content-Encoding, Content-Range) with the same code as an httpx answer, and anything but a 206 with a
length-delimited or close-delimited body goes back through httpx. What is enforced here: every socket
operation waits at most the time left to the request's deadline (a server trickling its headers or its
body is cut off on time), headers are capped at :data:`HEAD_LIMIT`, a body is read no further than the
range (a longer one is cut off and its connection closed), and redirects are followed as httpx follows
them (at most ``client.max_redirects``; an Authorization header, the Hub token, is dropped when one leads
to another origin, as httpx drops it).
"""

from __future__ import annotations

import base64
import re
import socket
import ssl
import threading
from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

from eaglekit.core.errors import LocationError

#: Ranges from this size on take the socket path (similarity blocks of 8 MiB, export's 16 MiB, drift's
#: units of about 256 KiB); smaller ones (the 64 KiB header windows, small files) stay with httpx, whose
#: per-request cost does not matter there.
FAST_MIN_BYTES = 128 * 1024
#: Status line and headers of one answer, at most.
HEAD_LIMIT = 64 * 1024
#: Bytes of a redirect's body read (and discarded) to keep its connection; a longer one closes it.
REDIRECT_BODY_LIMIT = 64 * 1024
#: Idle keep-alive connections kept per origin (the range pipeline has at most six requests in flight).
MAX_IDLE = 8
_STATUS = re.compile(rb"HTTP/1\.([01]) (\d{3})(?: [^\r\n]*)?")
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Stale(ConnectionError):
    """A reused keep-alive connection the server had closed before sending any byte of the answer."""


def ssl_context_for(client, url) -> ssl.SSLContext | None | bool:
    """The SSL context ``client`` (httpx or httpx2) would use to connect straight to ``url`` (an httpx URL;
    None for plain http), or False when it would not connect straight there: a proxy, a custom or mock
    transport, a Unix socket or a bound local address, custom auth, response hooks."""
    try:
        transport = client._transport_for_url(url)
    except (AttributeError, TypeError):  # a client without httpx's internals keeps its own path
        return False
    pool = getattr(transport, "_pool", None)
    if (type(transport).__name__ != "HTTPTransport" or type(pool).__name__ != "ConnectionPool"
            or getattr(pool, "_uds", None) or getattr(pool, "_local_address", None)
            or getattr(client, "auth", None) is not None or client.event_hooks.get("response")
            or url.scheme not in _DEFAULT_PORTS):
        return False
    return pool._ssl_context if url.scheme == "https" else None


class FastRanges:
    """Keep-alive sockets per origin for one source's large range reads (thread-safe).

    :meth:`open` sends a request and returns the final answer's :class:`RawResponse` (redirects
    followed), or None when the client would not connect directly; :meth:`close` closes idle sockets."""

    def __init__(self) -> None:
        self._idle: dict[tuple, list[socket.socket]] = {}  # (scheme, host, port, SSL context) -> sockets
        self._lock = threading.Lock()
        self._closed = False

    def open(self, client, url: str, headers: Mapping[str, str], deadline, what: str) -> RawResponse | None:
        """GET ``url`` with ``headers`` (Range and Accept-Encoding included) within ``deadline`` (an
        object with ``left()``: seconds remaining, raising once none are). Raises OSError for transport
        failures (socket.timeout when the deadline cut a wait short) and LocationError for an answer
        that is not HTTP/1.x or whose headers are too large or malformed."""
        base, hops = dict(headers), 0
        while True:
            request = client.build_request("GET", url, headers=base)
            if hops == 0 and (request.url.username or request.url.password):
                # httpx sends the first URL's user:password as Basic auth, kept across same-origin redirects
                base["Authorization"] = request.headers["Authorization"] = _basic(request.url)
            for hook in client.event_hooks.get("request", ()):
                hook(request)
            context = ssl_context_for(client, request.url)
            wire = _wire(request)
            if context is False or wire is None:
                return None
            target = request.url
            # A connection is reused only for the same origin through the same SSL context (its trust).
            origin = (target.scheme, target.host, target.port or _DEFAULT_PORTS[target.scheme], context)
            try:
                response = self._exchange(origin, wire, deadline, what)
            except _Stale:  # the server closed an idle connection: once more, on a fresh one
                self._drop_idle(origin)
                response = self._exchange(origin, wire, deadline, what)
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location or hops >= client.max_redirects:
                return response  # too many redirects: range_get asks httpx, which says so as before
            response.discard()
            hops += 1
            try:
                new = urljoin(str(target), location)
                if urlsplit(new).scheme not in _DEFAULT_PORTS:
                    return None
                urlsplit(new).port  # noqa: B018  (a malformed host or port raises here, not deeper down)
            except ValueError:
                return None  # httpx follows (or refuses) this redirect itself, with its own one-line errors
            if not _keeps_authorization(str(target), new):
                base = {k: v for k, v in base.items() if k.lower() != "authorization"}
            url = new

    def _exchange(self, origin, wire: bytes, deadline, what: str) -> RawResponse:
        sock, reused = self._connect(origin, deadline)
        try:
            sock.settimeout(deadline.left())
            try:
                sock.sendall(wire)
            except (BrokenPipeError, ConnectionResetError):
                if reused:
                    raise _Stale from None
                raise
            status, version, head, rest = _read_head(sock, deadline, reused, what)
        except BaseException:
            sock.close()
            raise
        return RawResponse(self, origin, sock, status, version, head, rest, deadline)

    def _connect(self, origin, deadline) -> tuple[socket.socket, bool]:
        with self._lock:
            idle = self._idle.get(origin)
            if idle:
                return idle.pop(), True
        scheme, host, port, context = origin
        sock = socket.create_connection((host, port), timeout=deadline.left())
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if scheme == "https":
                sock.settimeout(deadline.left())
                sock = (context or ssl.create_default_context()).wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        return sock, False

    def _release(self, origin, sock: socket.socket) -> None:
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if not self._closed and len(idle) < MAX_IDLE:
                idle.append(sock)
                return
        sock.close()

    def _drop_idle(self, origin) -> None:
        with self._lock:
            stale = self._idle.pop(origin, [])
        for sock in stale:
            sock.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, {}
        for socks in idle.values():
            for sock in socks:
                sock.close()


class RawResponse:
    """An answer whose status line and headers are read (names in lower case) and whose body is not.

    :meth:`read_into` receives the body; :meth:`close` hands the connection back for reuse when the
    body was read exactly to its end, and closes it otherwise (a body cut off, an unknown length)."""

    def __init__(self, owner: FastRanges, origin, sock: socket.socket, status: int, version: int,
                 headers: dict[str, str], rest: memoryview, deadline) -> None:
        self._owner, self._origin, self._sock, self._deadline = owner, origin, sock, deadline
        self.status_code, self.http_minor, self.headers, self._rest = status, version, headers, rest
        self._reusable = False

    def __enter__(self) -> RawResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def framed(self) -> bool:
        """Whether the body's length is known without decoding (no Transfer-Encoding)."""
        return "transfer-encoding" not in self.headers

    def content_length(self, what: str) -> int | None:
        text = self.headers.get("content-length")
        if text is None:
            return None
        values = {v.strip() for v in text.split(",")}
        if len(values) != 1 or not next(iter(values)).isdigit():
            raise LocationError(f"{what}: the server's Content-Length {text[:40]!r} is not a byte count.")
        return int(values.pop())

    def read_into(self, view: memoryview, what: str) -> int:
        """Fill ``view`` with the body: first what came with the headers, then straight from the socket;
        stops at the announced length or the end of the stream (returns the bytes written, fewer than
        ``len(view)`` only then). Never reads past ``len(view)``."""
        announced = self.content_length(what)
        want = len(view) if announced is None else min(len(view), announced)
        rest = self._rest
        got = min(len(rest), want)
        view[:got] = rest[:got]
        sock, deadline = self._sock, self._deadline
        while got < want:
            sock.settimeout(deadline.left())
            n = sock.recv_into(view[got:want])
            if n == 0:
                break
            got += n
        self._reusable = (announced == got and len(rest) <= got and self.http_minor == 1
                          and "close" not in self.headers.get("connection", "").lower())
        return got

    def discard(self) -> None:
        """Read a small body (a redirect's) to keep the connection, or close it; either way, done."""
        try:
            n = self.content_length("")
        except LocationError:
            n = None
        if n is not None and n <= REDIRECT_BODY_LIMIT and self.framed:
            self.read_into(memoryview(bytearray(n)), "")
        self.close()

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._reusable:
            self._owner._release(self._origin, sock)
        else:
            sock.close()


# -- the wire ------------------------------------------------------------------------------------------
def _basic(url) -> str:
    """The Authorization value httpx makes of a URL's user:password (``BasicAuth``)."""
    return "Basic " + base64.b64encode(f"{url.username}:{url.password}".encode()).decode()  # already decoded


def _wire(request) -> bytes | None:
    """The request's bytes (HTTP/1.1); None when a header could not be sent as it is (httpx then decides
    what to do with it)."""
    lines = [b"GET " + request.url.raw_path + b" HTTP/1.1"]
    for k, v in request.headers.raw:
        if not k or any(c in k + v for c in b"\r\n\0"):
            return None
        lines.append(k + b": " + v)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _read_head(sock: socket.socket, deadline, reused: bool, what: str):
    """(status, minor version, headers with lower-case names, body bytes received with them)."""
    buf = bytearray(HEAD_LIMIT)
    view, got, end = memoryview(buf), 0, -1
    while end < 0:
        if got == HEAD_LIMIT:
            raise LocationError(f"{what}: the server's answer headers exceed {HEAD_LIMIT // 1024} KiB; refusing it.")
        sock.settimeout(deadline.left())
        try:
            n = sock.recv_into(view[got:])
        except ConnectionResetError:
            if reused and got == 0:
                raise _Stale from None
            raise
        if n == 0:
            if reused and got == 0:
                raise _Stale
            raise LocationError(f"{what}: the server closed the connection before its answer's headers ended.")
        end = buf.find(b"\r\n\r\n", max(0, got - 3), got + n)
        got += n
    lines = bytes(buf[:end]).split(b"\r\n")
    m = _STATUS.fullmatch(lines[0])
    if not m:
        raise LocationError(f"{what}: the server's answer is not HTTP/1.x ({lines[0][:40]!r}).")
    head: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise LocationError(f"{what}: the server's answer has a malformed header line.")
        key, text = name.decode("latin-1").lower(), value.strip().decode("latin-1")
        head[key] = f"{head[key]}, {text}" if key in head else text
    return int(m[2]), int(m[1]), head, view[end + 4:got]


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme)


def _keeps_authorization(old: str, new: str) -> bool:
    """httpx keeps Authorization on a redirect to the same origin, or from http://host:80 to
    https://host:443 (``_redirect_headers``, ``_is_https_redirect`` in httpx/_client.py); drops it otherwise."""
    (sa, ha, pa), (sb, hb, pb) = _origin(old), _origin(new)
    return (sa, ha, pa) == (sb, hb, pb) or (ha == hb and (sa, pa, sb, pb) == ("http", 80, "https", 443))
