"""Fetching an engine's ``/metrics`` text, and reading a server log, against servers and files that may be hostile.

One GET per scrape through httpx, with the guards of :mod:`eaglekit.io.sources.http`: a total deadline
(:class:`~eaglekit.io.sources.http.Deadline`, so a server trickling one byte a second cannot hang the caller), a
body cap (:data:`MAX_METRICS_BYTES`; an engine's page is a few hundred KiB), and redirects followed only on the
same scheme, host and port (at most :data:`MAX_REDIRECTS`): a redirect to another host is refused, so a token
(``token=``, sent as ``Authorization: Bearer``) never leaves the host of the URL it was given for.

A compressed body (``Content-Encoding: gzip`` or ``deflate``, up to :data:`MAX_ENCODINGS` layers) is inflated
here, not by httpx: each layer in chunks of at most :data:`CHUNK` bytes (``zlib.decompressobj().decompress(data,
max_length)``), layer by layer, against the body cap, so a 4 GiB inner layer stops at the cap, not after it.
Files (a server log, an offline result) are opened with ``O_NONBLOCK`` and must be regular files
(:func:`read_regular`): a FIFO without a writer is refused at once instead of waiting forever.
"""

from __future__ import annotations

import os
import stat
import zlib
from urllib.parse import urljoin, urlsplit

from eaglekit.core.errors import InputError, LocationError, TooLargeError
from eaglekit.core.redact import redact_url, shown
from eaglekit.io.sources.http import Deadline, guard_client, raise_for_http_status, read_error_body, transport_errors

__all__ = ["MAX_LOG_BYTES", "MAX_METRICS_BYTES", "MAX_REDIRECTS", "MetricsClient", "inflate", "metrics_url",
           "read_log", "read_regular"]

#: Largest /metrics body read (vLLM's page with every histogram is about 200 KiB).
MAX_METRICS_BYTES = 16 * 1024 * 1024
#: Largest server log read (its last bytes are kept past this).
MAX_LOG_BYTES = 256 * 1024 * 1024
#: Same-origin redirects followed (``/metrics`` -> ``/metrics/`` is the usual one).
MAX_REDIRECTS = 3
#: Content-Encoding layers inflated (an engine sends one, gzip, or none).
MAX_ENCODINGS = 2
#: Bytes one inflating step may produce.
CHUNK = 256 * 1024


def metrics_url(url: str) -> str:
    """``URL`` as given when it names a path, else ``URL/metrics`` (``http://host:8000`` is the server)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port out of range or not a number raises here
    except ValueError as e:
        raise InputError(f"{redact_url(url)[:200]}: not a URL ({e}); expected http(s)://HOST[:PORT][/metrics].") from e
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(f"{redact_url(url)}: expected http(s)://HOST[:PORT][/metrics], the engine's metrics address.")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/metrics"


def _origin(url: str) -> tuple[str, str, int | None]:
    p = urlsplit(url)
    try:
        port = p.port or {"http": 80, "https": 443}.get(p.scheme)
    except ValueError:
        port = -1
    return (p.scheme, (p.hostname or "").lower(), port)


class MetricsClient:
    """Scrapes one server's metrics; ``timeout`` bounds each scrape in all (connect, headers, body)."""

    def __init__(self, url: str, *, timeout: float | None = None, token: str | None = None,
                 max_bytes: int = MAX_METRICS_BYTES) -> None:
        import httpx  # loaded when a server is scraped: start-up stays fast

        self.url = metrics_url(url)
        self.shown = redact_url(self.url)
        self.timeout = timeout
        self.max_bytes = max_bytes
        self._headers = {"Accept": "text/plain; version=0.0.4", "Accept-Encoding": "gzip"}
        self._token = token
        self._client = guard_client(httpx.Client(follow_redirects=False))

    def scrape(self) -> str:
        """One ``/metrics`` text."""
        deadline = Deadline(self.shown, self.timeout)
        url = self.url
        for _ in range(MAX_REDIRECTS + 1):
            headers = dict(self._headers)
            if self._token and _origin(url) == _origin(self.url):
                headers["Authorization"] = f"Bearer {self._token}"
            with transport_errors(url, deadline), deadline, \
                    self._client.stream("GET", url, headers=headers, timeout=deadline.left()) as r:
                if 300 <= r.status_code < 400 and r.headers.get("location"):
                    read_error_body(r, deadline, limit=4096)
                    nxt = urljoin(url, r.headers["location"])
                    if _origin(nxt) != _origin(self.url):
                        raise LocationError(f"{self.shown} redirects to another host ({redact_url(nxt)}); eaglekit "
                                            "does not follow it (a token would go with it): give that address "
                                            "directly if you trust it.")
                    url = nxt
                    continue
                raise_for_http_status(r.status_code, r.headers, self.shown)
                return self._body(r, deadline)
        raise LocationError(f"{self.shown}: more than {MAX_REDIRECTS} redirects; give the final address.")

    def _body(self, r, deadline: Deadline) -> str:
        too_big = TooLargeError(f"{self.shown}: the metrics page is larger than {self.max_bytes:,} bytes; not an "
                                "engine's /metrics (vLLM's is a few hundred KiB).")
        try:
            announced = int(r.headers.get("content-length") or 0)
        except ValueError:
            announced = 0
        if announced > self.max_bytes:
            raise too_big
        encodings = [e.strip().lower() for e in r.headers.get("content-encoding", "").split(",") if e.strip()]
        encodings = [e for e in encodings if e != "identity"]
        if len(encodings) > MAX_ENCODINGS or any(e not in ("gzip", "x-gzip", "deflate") for e in encodings):
            raise InputError(f"{self.shown}: Content-Encoding {shown(r.headers.get('content-encoding', ''))[:80]!r}; "
                             f"eaglekit reads gzip or deflate, at most {MAX_ENCODINGS} layers.")
        body = bytearray()
        raw = _checked(r.iter_raw(), deadline)
        for part in inflate(raw, len(encodings), limit=self.max_bytes, what=self.shown):
            body += part
            if len(body) > self.max_bytes:
                raise too_big
        return body.decode("utf-8", errors="replace")

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> MetricsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _checked(parts, deadline: Deadline):
    for part in parts:
        deadline.check()
        yield part


def inflate(parts, layers: int, *, limit: int, what: str = "body"):
    """``parts`` (an iterable of bytes) inflated through ``layers`` gzip/zlib layers, in chunks of at most
    :data:`CHUNK` bytes; a layer that would give more than ``limit`` bytes is refused as it passes it."""
    for _ in range(layers):
        parts = _inflate_one(parts, limit, what)
    return parts


def _inflate_one(parts, limit: int, what: str):
    d = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or zlib header, told apart by its magic
    total = 0
    try:
        for data in parts:
            while data and not d.eof:
                out = d.decompress(data, CHUNK)
                data = d.unconsumed_tail
                total += len(out)
                if total > limit:
                    raise TooLargeError(f"{what}: a compressed layer inflates past {limit:,} bytes; not an "
                                        "engine's /metrics.")
                if out:
                    yield out
        tail = d.flush(CHUNK)
        if len(tail) + total > limit:
            raise TooLargeError(f"{what}: a compressed layer inflates past {limit:,} bytes; not an engine's /metrics.")
        if tail:
            yield tail
    except zlib.error as e:
        raise InputError(f"{what}: the compressed body is broken ({e}); not an engine's /metrics.") from e


def read_regular(path: str | os.PathLike[str], *, max_bytes: int, tail: bool = False, what: str = "a file"
                 ) -> tuple[bytes, bool]:
    """A regular file's bytes, at most ``max_bytes`` (its last ones with ``tail``, else its first; the flag says
    it was longer). Opened with ``O_NONBLOCK`` and checked with ``fstat``: a FIFO, a device or a folder is refused
    at once, never waited on."""
    p = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"cannot read {shown(p)}: {e.strerror or e}.") from e
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{shown(p)}: not a file (a FIFO, a device or a folder); give {what}.")
        with os.fdopen(fd, "rb", closefd=False) as f:
            cut = st.st_size > max_bytes
            if cut and tail:
                f.seek(st.st_size - max_bytes)
            data = f.read(max_bytes + (0 if tail else 1))
    except OSError as e:
        raise InputError(f"cannot read {shown(p)}: {e.strerror or e}.") from e
    finally:
        os.close(fd)
    if not tail and len(data) > max_bytes:
        return data[:max_bytes], True
    return data, cut


def read_log(path: str | os.PathLike[str], *, max_bytes: int = MAX_LOG_BYTES) -> tuple[str, bool]:
    """A server log's text (its last ``max_bytes`` when longer; the flag says so). Never follows into a
    device or a folder."""
    data, cut = read_regular(path, max_bytes=max_bytes, tail=True, what="the SGLang server's log file")
    return data.decode("utf-8", errors="replace"), cut
