"""Fetching an engine's ``/metrics`` text, and reading a server log, against servers and files that may be hostile.

One GET per scrape through httpx, with the guards of :mod:`eaglekit.io.sources.http`: a total deadline
(:class:`~eaglekit.io.sources.http.Deadline`, so a server trickling one byte a second cannot hang the caller), a
body cap (:data:`MAX_METRICS_BYTES`; an engine's page is a few hundred KiB), and redirects followed only on the
same scheme, host and port (at most :data:`MAX_REDIRECTS`): a redirect to another host is refused, so a token
(``token=``, sent as ``Authorization: Bearer``) never leaves the host of the URL it was given for.
"""

from __future__ import annotations

import os
from urllib.parse import urljoin, urlsplit

from eaglekit.core.errors import InputError, LocationError, TooLargeError
from eaglekit.core.redact import redact_url, shown
from eaglekit.io.sources.http import Deadline, guard_client, raise_for_http_status, read_error_body, transport_errors

__all__ = ["MAX_LOG_BYTES", "MAX_METRICS_BYTES", "MAX_REDIRECTS", "MetricsClient", "metrics_url", "read_log"]

#: Largest /metrics body read (vLLM's page with every histogram is about 200 KiB).
MAX_METRICS_BYTES = 16 * 1024 * 1024
#: Largest server log read (its last bytes are kept past this).
MAX_LOG_BYTES = 256 * 1024 * 1024
#: Same-origin redirects followed (``/metrics`` -> ``/metrics/`` is the usual one).
MAX_REDIRECTS = 3


def metrics_url(url: str) -> str:
    """``URL`` as given when it names a path, else ``URL/metrics`` (``http://host:8000`` is the server)."""
    parts = urlsplit(url)
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
        self._headers = {"Accept": "text/plain; version=0.0.4"}
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
        body = bytearray()
        for part in r.iter_bytes():
            deadline.check()
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


def read_log(path: str | os.PathLike[str], *, max_bytes: int = MAX_LOG_BYTES) -> tuple[str, bool]:
    """A server log's text (its last ``max_bytes`` when longer; the flag says so). Never follows into a
    device or a folder."""
    p = os.fspath(path)
    try:
        if not os.path.isfile(p):
            raise InputError(f"{shown(p)}: not a file; give the SGLang server's log file.")
        size = os.path.getsize(p)
        with open(p, "rb") as f:
            cut = size > max_bytes
            if cut:
                f.seek(size - max_bytes)
            data = f.read(max_bytes)
    except OSError as e:
        raise InputError(f"cannot read {shown(p)}: {e.strerror or e}.") from e
    return data.decode("utf-8", errors="replace"), cut
