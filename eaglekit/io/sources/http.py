"""Any HTTP(S) server that honours byte ranges, and the range-request logic the Hub reader shares.

A folder URL cannot be listed over plain HTTP, so the reader probes ``model.safetensors.index.json``
and ``model.safetensors`` beside the location. A server that answers a Range request with the whole
file (200) is refused before its body is read: eaglekit never streams a multi-GB file to see a header.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from urllib.parse import urlsplit

from eaglekit.core.errors import AuthError, LocationError, NotFoundError, RangeNotSupportedError, RateLimitError
from eaglekit.core.redact import redact_url
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source

_CONTENT_RANGE = re.compile(r"bytes\s+(?:(\d+)-(\d+)|\*)/(\d+)")


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
                         f"{redact_url(str(e))}. Check the address and that the server is running.")


_TRANSPORT_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2", "ssl", "socket", "h11")


@contextmanager
def transport_errors(url: str) -> Iterator[None]:
    """Turn connection failures of httpx or httpx2 (refused, DNS, timeout, TLS) into a LocationError."""
    try:
        yield
    except LocationError:
        raise
    except Exception as e:
        if type(e).__module__.split(".")[0] in _TRANSPORT_MODULES:
            raise connect_error(url, e) from e
        raise


def range_get(client, url: str, start: int, length: int, *, headers: Mapping[str, str] | None = None,
              what: str | None = None, check: Callable | None = None) -> Chunk:
    """One ``Range: bytes=start-(start+length-1)`` GET through an httpx-style client.

    ``check(response)`` raises for error statuses (the Hub passes ``hf_raise_for_status``); it runs
    before the body is read. A 200 answer to a range request is refused without reading the body.
    """
    what = what or redact_url(url)
    if length <= 0:
        raise ValueError("length must be positive")
    req_headers = {**(headers or {}), "Range": f"bytes={start}-{start + length - 1}", "Accept-Encoding": "identity"}
    with transport_errors(url), client.stream("GET", url, headers=req_headers) as r:
        if r.status_code == 416:
            return Chunk(b"", _total_from(r.headers.get("content-range"), what))
        if check is not None:
            check(r)
        raise_for_http_status(r.status_code, r.headers, what)
        if r.status_code != 206:
            raise RangeNotSupportedError(
                f"{what}: the server ignored the byte-range request (HTTP {r.status_code} instead of 206) "
                "and would send the whole file; eaglekit refuses to download it to read a header. "
                "Use a server that supports Range requests, or download the file and inspect it locally.")
        total = _total_from(r.headers.get("content-range"), what)
        data = b"".join(r.iter_bytes())
    return Chunk(data[:length], total)


def read_capped(response, limit: int, what: str) -> bytes:
    """The body of a streamed response, refusing one larger than ``limit`` (a small JSON file expected)."""
    too_big = LocationError(f"{what} is larger than {limit} bytes; expected a small JSON file.")
    if int(response.headers.get("content-length") or 0) > limit:
        raise too_big
    body = bytearray()
    for part in response.iter_bytes():
        body += part
        if len(body) > limit:
            raise too_big
    return bytes(body)


def _total_from(content_range: str | None, what: str) -> int:
    m = _CONTENT_RANGE.match(content_range or "")
    if not m:
        raise RangeNotSupportedError(f"{what}: the server's answer has no valid Content-Range header "
                                     f"({content_range!r}); cannot read by byte range.")
    return int(m.group(3))


class HttpSource(Source):
    kind = "http"

    def __init__(self, base_url: str, *, display: str | None = None, timeout: float = 30.0,
                 query: dict[str, str] | None = None) -> None:
        import httpx

        super().__init__(display or redact_url(base_url))
        self.base_url = base_url.rstrip("/")
        self._query = query or {}  # name -> "?..." (kept for the file the location named)
        self._client = httpx.Client(follow_redirects=True, timeout=timeout)

    def url(self, name: str) -> str:
        return f"{self.base_url}/{name}{self._query.get(name, '')}"

    def read(self, name: str, start: int, length: int) -> Chunk:
        return range_get(self._client, self.url(name), start, length)

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        url = self.url(name)
        what = redact_url(url)
        with transport_errors(url), self._client.stream("GET", url) as r:
            if r.status_code in (404, 410):
                return None
            raise_for_http_status(r.status_code, r.headers, what)
            return read_capped(r, limit, what)

    def close(self) -> None:
        self._client.close()
