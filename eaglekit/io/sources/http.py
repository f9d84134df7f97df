"""Any HTTP(S) server that honours byte ranges, and the range-request logic the Hub reader shares.

A folder URL cannot be listed over plain HTTP, so the reader probes ``model.safetensors.index.json``
and ``model.safetensors`` beside the location. A server that answers a Range request with the whole
file (200) is refused before its body is read: eaglekit never streams a multi-GB file to see a header.

Servers are not trusted (:func:`range_get`): an answer is read no further than the bytes asked for,
an encoded (gzip...) range answer, a misplaced Content-Range and an over-long small file are refused,
and every request has a total deadline (:class:`Deadline`: ``EAGLEKIT_TIMEOUT`` seconds, default 60,
``--timeout`` on the command line), so a silent or a one-byte-a-second server cannot hang a caller.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

from eaglekit.core.errors import (AuthError, InputError, LocationError, NotFoundError, RangeNotSupportedError,
                                  RateLimitError, TooLargeError)
from eaglekit.core.redact import redact_url, shown
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source
from eaglekit.io.sources.fast_range import FAST_MIN_BYTES, FastRanges

_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+)")
#: Seconds a request may take in all (connecting, waiting, transferring) unless EAGLEKIT_TIMEOUT says.
DEFAULT_TIMEOUT = 60.0
TIMEOUT_ENV = "EAGLEKIT_TIMEOUT"
#: An error answer's body is read up to this size (for its message), never more.
ERROR_BODY_LIMIT = 64 * 1024


def request_timeout() -> float:
    """The total seconds one request may take when the caller passes no ``timeout=``: ``EAGLEKIT_TIMEOUT``,
    else 60. (The CLI's ``--timeout`` travels down the calls as ``timeout=``.)"""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    return check_timeout(text, where=f"{TIMEOUT_ENV}={text!r}") if text else DEFAULT_TIMEOUT


def check_timeout(value: object, *, where: str = "timeout") -> float:
    """A timeout in seconds, positive and finite, or InputError."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"{where}: expected a positive number of seconds.")
    return seconds


class Deadline:
    """The moment a request must be complete by. Hand :meth:`left` to httpx as the timeout of every
    phase, and call :meth:`check` between body chunks: a server sending one byte a second never
    trips a read timeout, only this."""

    def __init__(self, what: str, seconds: float | None = None) -> None:
        self.what = what
        self.seconds = request_timeout() if seconds is None else seconds
        self.end = time.monotonic() + self.seconds

    def left(self) -> float:
        """Seconds remaining; raises the deadline error when none are."""
        remaining = self.end - time.monotonic()
        if remaining <= 0:
            raise self.expired()
        return remaining

    check = left

    def __enter__(self) -> Deadline:
        """Within the block, every socket read and write of a guarded client (:func:`guard_client`) in
        this thread is capped at the time left: response headers trickled one byte a second included."""
        _active.stack = [*getattr(_active, "stack", []), self.end]
        return self

    def __exit__(self, *exc: object) -> None:
        _active.stack = _active.stack[:-1]

    def expired(self) -> LocationError:
        return LocationError(f"{self.what}: no complete answer within {self.seconds:g} s (the time allowed per "
                             f"request); the server is stalled or too slow. Allow more with --timeout or "
                             f"{TIMEOUT_ENV}=SECONDS.")


_active = threading.local()  # .stack: the ends of the deadlines active in this thread


def _capped(timeout: float | None) -> float | None:
    """A socket timeout no later than the innermost active deadline (a tiny one once it has passed, so
    the transport raises its own timeout error)."""
    stack = getattr(_active, "stack", None)
    if not stack:
        return timeout
    left = max(stack[-1] - time.monotonic(), 1e-6)
    return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """An httpcore network stream whose every read and write waits no longer than the active deadline."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _capped(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        return self._inner.write(buffer, _capped(timeout))

    def start_tls(self, ssl_context, server_hostname: str | None = None, timeout: float | None = None):
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _capped(timeout)))

    def __getattr__(self, name: str):  # close, get_extra_info
        return getattr(self._inner, name)


class _DeadlineBackend:
    """An httpcore network backend whose streams honour the active :class:`Deadline`."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        return _DeadlineStream(self._inner.connect_tcp(host, port, _capped(timeout), local_address, socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(self._inner.connect_unix_socket(path, _capped(timeout), socket_options))

    def __getattr__(self, name: str):  # sleep
        return getattr(self._inner, name)


def guard_client(client):
    """``client`` (httpx or httpx2), its connections made deadline-aware where its transport is the
    standard one (httpcore's pool): a server then cannot stretch a request past its deadline by sending
    one byte at a time, headers included. Idempotent; a custom transport keeps per-read timeouts only."""
    for transport in [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is not None and not isinstance(backend, _DeadlineBackend):
            pool._network_backend = _DeadlineBackend(backend)
    return client


def raise_for_http_status(status: int, headers: Mapping[str, str], what: str) -> None:
    """Map an HTTP error status to eaglekit's errors, naming ``what`` was asked for."""
    if status < 400:
        return
    if status in (404, 410):
        raise NotFoundError(f"{what}: not found (HTTP {status}).")
    if status in (401, 403):
        raise AuthError(f"{what}: access refused (HTTP {status}); check the credentials the server expects.")
    if status == 429:
        raise RateLimitError(f"{what}: rate limited (HTTP 429){retry_hint(headers)}.")
    raise LocationError(f"{what}: the server answered HTTP {status}.")


def retry_hint(headers: Mapping[str, str]) -> str:
    after = headers.get("retry-after")
    return f"; the server asks to retry after {after} s" if after else "; retry later"


def connect_error(url: str, e: Exception) -> LocationError:
    url = redact_url(url)
    parts = urlsplit(url)
    return LocationError(f"Cannot reach {parts.scheme}://{parts.netloc} (for {url}): {type(e).__name__}: "
                         f"{shown(e)}. Check the address and that the server is running.")


_TRANSPORT_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2", "ssl", "socket", "h11")


@contextmanager
def transport_errors(url: str, deadline: Deadline | None = None) -> Iterator[None]:
    """Turn connection failures of httpx or httpx2 (refused, DNS, timeout, TLS) into a LocationError;
    a timeout with a ``deadline`` given says the deadline passed."""
    try:
        yield
    except LocationError:
        raise
    except Exception as e:
        if type(e).__module__.split(".")[0] in _TRANSPORT_MODULES:
            if deadline is not None and type(e).__name__.endswith("Timeout"):
                raise deadline.expired() from e
            raise connect_error(url, e) from e
        raise


def range_get(client, url: str, start: int, length: int, *, headers: Mapping[str, str] | None = None,
              what: str | None = None, check: Callable | None = None, deadline: Deadline | None = None,
              into: bytearray | memoryview | None = None, fast: FastRanges | None = None) -> Chunk:
    """One ``Range: bytes=start-(start+length-1)`` GET through an httpx-style client: the one primitive
    every remote byte read goes through (HTTP and Hub sources, and any pipelining built on them).

    Contract, against a server that may lie:

    - returns at most ``length`` bytes at ``start`` with the file's total size (fewer only at the end of
      the file; bytes past the requested length are never read: the answer is cut off there);
    - a 200 (Range ignored) is refused before its body is read, as is a 206 whose Content-Encoding is not
      identity (a compressed range cannot be placed in the file, and would decompress without bound), or
      whose Content-Range is absent or is not the range asked for (up to the end of the file);
    - 416 returns an empty chunk with the size from ``Content-Range: bytes */N``;
    - the whole request (connect, headers, body) finishes within ``deadline`` (default: a fresh
      :class:`Deadline` of :func:`request_timeout` seconds) or raises LocationError;
    - ``check(response, deadline)`` raises for error statuses before the body is read (the Hub passes
      its error translation); otherwise error statuses become eaglekit's errors, reading no body;
    - with ``into`` (a writable buffer of at least ``length`` bytes) the body is written there and the
      chunk's data is a memoryview of it: no allocation per request (streamed reads reuse buffers);
    - with ``fast`` (the source's :class:`~eaglekit.io.sources.fast_range.FastRanges`), a range of at least
      :data:`~eaglekit.io.sources.fast_range.FAST_MIN_BYTES` is sent on a plain socket and its body received
      straight into the buffer, checked by the same code; any answer but a 206 with an undecoded body goes
      through httpx as above, and a client that would not connect directly (a proxy) never takes that path.
    """
    what = what or redact_url(url)
    if length <= 0:
        raise ValueError("length must be positive")
    deadline = deadline or Deadline(what)
    end = start + length - 1
    req_headers = {**(headers or {}), "Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"}
    if fast is not None and length >= FAST_MIN_BYTES:
        chunk = _fast_range_get(fast, client, url, start, end, req_headers, what, deadline, into)
        if chunk is not None:
            return chunk
    with transport_errors(url, deadline), deadline, \
            guard_client(client).stream("GET", url, headers=req_headers, timeout=deadline.left()) as r:
        if r.status_code == 416:
            return Chunk(b"", _total_from(r.headers.get("content-range"), what))
        if check is not None:
            check(r, deadline)
        raise_for_http_status(r.status_code, r.headers, what)
        if r.status_code != 206:
            raise RangeNotSupportedError(
                f"{what}: the server ignored the byte-range request (HTTP {r.status_code} instead of 206) "
                "and would send the whole file; eaglekit refuses to download it to read a header. "
                "Use a server that supports Range requests, or download the file and inspect it locally.")
        first, last, total = check_partial(r.headers, start, end, what)
        data = _read_exactly(r, last - first + 1, what, deadline, into)
    return Chunk(data, total)


def check_partial(headers: Mapping[str, str], start: int, end: int, what: str) -> tuple[int, int, int]:
    """(first, last, total) of a 206 answer to ``Range: bytes=start-end``, from its headers (looked up by
    lower-case name); refuses an encoded body and a Content-Range that is not the range asked for (up to
    the end of the file). The same checks for an httpx answer and a socket one."""
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise RangeNotSupportedError(
            f"{what}: the server answered a byte range with Content-Encoding {shown(encoding)!r} although "
            "identity was asked for; a compressed range cannot be placed in the file. Use a server that "
            "sends ranges unencoded.")
    first, last, total = _range_from(headers.get("content-range"), what)
    if first != start or last != min(end, total - 1):
        raise RangeNotSupportedError(
            f"{what}: asked for bytes {start}-{end} but the server answered bytes {first}-{last}/{total}; "
            "refusing a range that is not the one requested.")
    return first, last, total


def _fast_range_get(fast: FastRanges, client, url: str, start: int, end: int, headers: Mapping[str, str],
                    what: str, deadline: Deadline, into: bytearray | memoryview | None) -> Chunk | None:
    """The range through ``fast``'s sockets, or None when httpx is to answer it (see :func:`range_get`)."""
    try:
        r = fast.open(client, url, headers, deadline, what)
        if r is None:
            return None
        with r:
            if r.status_code != 206 or not r.framed:
                return None  # an error, a 200, a 416, a chunked body: httpx answers it, as before
            first, last, total = check_partial(r.headers, start, end, what)
            want = last - first + 1
            buf = (memoryview(bytearray(want)) if into is None else memoryview(into).cast("B"))[:want]
            got = r.read_into(buf, what)
    except TimeoutError as e:  # a socket wait cut short by the deadline
        raise deadline.expired() from e
    except (OSError, ValueError, OverflowError) as e:  # refused, reset, DNS, TLS; a host name no socket takes
        raise connect_error(url, e) from e
    if got < want:
        raise LocationError(f"{what}: the server's answer ended after {got} of the {want} bytes it announced.")
    return Chunk(buf if into is not None else bytes(buf), total)


def _read_exactly(response, want: int, what: str, deadline: Deadline,
                  into: bytearray | memoryview | None = None) -> bytes | memoryview:
    """The first ``want`` body bytes, undecoded; a longer body is cut off (never read past ``want``)."""
    buf, got = (bytearray(want) if into is None else memoryview(into).cast("B")[:want]), 0
    for part in response.iter_raw():
        deadline.check()
        take = min(len(part), want - got)
        buf[got:got + take] = part[:take]
        got += take
        if take < len(part):  # the server sends more than the range: stop reading here
            break
    if got < want:
        raise LocationError(f"{what}: the server's answer ended after {got} of the {want} bytes it announced.")
    return bytes(buf) if into is None else buf


def read_capped(response, limit: int, what: str, deadline: Deadline | None = None) -> bytes:
    """The body of a streamed response, refusing one larger than ``limit`` (a small JSON file expected)
    and, with a ``deadline``, one that arrives too slowly."""
    too_big = TooLargeError(f"{what} is larger than {limit} bytes; expected a small JSON file.")
    try:
        announced = int(response.headers.get("content-length") or 0)
    except ValueError:
        announced = 0
    if announced > limit:
        raise too_big
    body = bytearray()
    for part in response.iter_bytes():
        if deadline is not None:
            deadline.check()
        body += part
        if len(body) > limit:
            raise too_big
    return bytes(body)


def read_error_body(response, deadline: Deadline | None = None, limit: int = ERROR_BODY_LIMIT) -> bytes:
    """At most ``limit`` bytes of an error answer's body (for its message), remembered as the response's
    content so that ``response.json()`` works; the rest is never read."""
    body = bytearray()
    for part in response.iter_raw():
        if deadline is not None:
            deadline.check()
        body += part[:limit - len(body)]
        if len(body) >= limit:
            break
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    response._content = bytes(body) if encoding in ("", "identity") else b""
    return response._content


def _range_from(content_range: str | None, what: str) -> tuple[int, int, int]:
    m = _CONTENT_RANGE.fullmatch((content_range or "").strip())
    if not m or m.group(1) is None:
        raise RangeNotSupportedError(f"{what}: the server's answer has no valid Content-Range header "
                                     f"({shown(content_range)!r}); cannot read by byte range.")
    first, last, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if not first <= last < total:
        raise RangeNotSupportedError(f"{what}: the server's Content-Range {shown(content_range)!r} is "
                                     "inconsistent; cannot read by byte range.")
    return first, last, total


def _total_from(content_range: str | None, what: str) -> int:
    m = _CONTENT_RANGE.fullmatch((content_range or "").strip())
    if not m:
        raise RangeNotSupportedError(f"{what}: the server's answer has no valid Content-Range header "
                                     f"({shown(content_range)!r}); cannot read by byte range.")
    return int(m.group(3))


class HttpSource(Source):
    kind = "http"

    def __init__(self, base_url: str, *, display: str | None = None, timeout: float | None = None,
                 query: dict[str, str] | None = None) -> None:
        """``timeout``: total seconds per request (default: :func:`request_timeout` at each request)."""
        import httpx

        super().__init__(display or redact_url(base_url))
        self.base_url = base_url.rstrip("/")
        self.timeout = None if timeout is None else check_timeout(timeout)
        self._query = query or {}  # name -> "?..." (kept for the file the location named)
        self._client = guard_client(httpx.Client(follow_redirects=True))
        self._fast = FastRanges()  # sockets for large ranges (range_get's socket path)

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}{self._query.get(name, '')}"

    def read(self, name: str, start: int, length: int) -> Chunk:
        url = self.url(name)
        return range_get(self._client, url, start, length, deadline=Deadline(redact_url(url), self.timeout),
                         fast=self._fast)

    def read_into(self, name: str, start: int, buffer: bytearray | memoryview) -> int:
        url = self.url(name)
        return len(range_get(self._client, url, start, len(buffer), deadline=Deadline(redact_url(url), self.timeout),
                             into=buffer, fast=self._fast).data)

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        url = self.url(name)
        what = redact_url(url)
        deadline = Deadline(what, self.timeout)
        with transport_errors(url, deadline), deadline, self._client.stream("GET", url, timeout=deadline.left()) as r:
            if r.status_code in (404, 410):
                read_error_body(r, deadline)  # drained (at most 64 KiB): the connection goes back to the pool
                return None
            raise_for_http_status(r.status_code, r.headers, what)
            return read_capped(r, limit, what, deadline)

    def close(self) -> None:
        self._fast.close()
        self._client.close()
