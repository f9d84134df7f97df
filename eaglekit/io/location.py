"""One grammar for checkpoint locations, shared by the library, the notebooks and the CLI.

=============================================  =============================================
``/data/drafter`` or ``./model.safetensors``   a local folder or file
``hf://OWNER/REPO[@REVISION][/PATH]``           a Hub repo (honours HF_ENDPOINT and HF_TOKEN)
``https://host/dir/model.safetensors``         any HTTP server that honours byte ranges
``ssh://[user@]host[:port]/abs/path``          a host over SSH (SFTP), ~/.ssh/config aware
``[user@]host:/abs/path``                      the same, scp-style
=============================================  =============================================

A location names either a file (``*.safetensors``, ``*.index.json``, ``config.json``) or a folder.
Parsing is pure; :func:`open_source` is the only place that touches the network or the disk.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from eaglekit.core.errors import LocationError
from eaglekit.core.redact import redact_url

LocationKind = Literal["local", "hub", "http", "ssh"]

_HF_RE = re.compile(r"^hf://(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)(?:@(?P<rev>refs/(?:pr|convert)/[^/]+|[^/]+))?(?:/(?P<path>.*))?$")
_SCP_RE = re.compile(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[\w.-]+):(?P<path>/.*)$")
_FILE_SUFFIXES = (".safetensors", ".json")
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


def _split_url(text: str, raw: str):
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as e:
        raise LocationError(f"Malformed URL {redact_url(raw)!r}: {e}.") from e
    return parts


@dataclass(frozen=True)
class Location:
    """A parsed location: ``folder`` holds the checkpoint, ``filename`` is set when a file was named."""

    kind: LocationKind
    raw: str
    folder: str
    filename: str | None = None
    # hub
    repo_id: str | None = None
    revision: str | None = None
    # ssh
    user: str | None = None
    host: str | None = None
    port: int | None = None
    # http: a query string that belongs to the named file (a pre-signed URL's signature)
    query: str = ""

    def __str__(self) -> str:
        return self.raw


def _split_file(path: str) -> tuple[str, str | None]:
    """Split ``dir/model.safetensors`` into (``dir``, ``model.safetensors``); a folder keeps None."""
    stripped = path.rstrip("/")
    head, _, tail = stripped.rpartition("/")
    if tail.endswith(_FILE_SUFFIXES):
        return head, tail
    return stripped, None


def parse_location(location: str | os.PathLike[str]) -> Location:
    """Parse a location string (pure: no I/O except asking whether a local path exists)."""
    raw = os.fspath(location)
    text = raw.strip()
    if not text:
        raise LocationError("Empty location: give a local path, hf://OWNER/REPO, an http(s):// URL or ssh://host/path.")
    if text.startswith("hf://"):
        m = _HF_RE.match(text)
        if not m:
            raise LocationError(f"Malformed Hub location {raw!r}: expected hf://OWNER/REPO[@REVISION][/PATH].")
        folder, filename = _split_file(m["path"] or "")
        return Location("hub", raw, folder, filename, repo_id=f"{m['owner']}/{m['repo']}", revision=m["rev"])
    if text.startswith(("http://", "https://")):
        parts = _split_url(text, raw)
        if not parts.hostname:
            raise LocationError(f"Malformed URL {redact_url(raw)!r}: no host.")
        base = f"{parts.scheme}://{parts.netloc}"
        folder, filename = _split_file(parts.path)
        query = f"?{parts.query}" if parts.query and filename else ""  # e.g. a pre-signed URL's signature
        return Location("http", redact_url(raw), base + folder, filename, query=query)
    if text.startswith("ssh://"):
        if not text[6:].split("/", 1)[0] or "/" not in text[6:]:
            raise LocationError(f"Malformed SSH location {raw!r}: expected ssh://[user@]host[:port]/abs/path.")
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as e:
            raise LocationError(f"Malformed SSH location {raw!r}: the port is not a number.") from e
        if not parts.hostname:
            raise LocationError(f"Malformed SSH location {raw!r}: expected ssh://[user@]host[:port]/abs/path.")
        folder, filename = _split_file(unquote(parts.path))
        return Location("ssh", raw, folder or "/", filename, user=parts.username, host=parts.hostname, port=port)
    scheme = _SCHEME_RE.match(text)
    if scheme:
        raise LocationError(f"Unsupported location scheme {scheme.group(1)}:// in {redact_url(raw)!r}: use a local "
                            "path, hf://, http(s):// (a server honouring byte ranges) or ssh://.")
    m = _SCP_RE.match(text)
    if m and not os.path.exists(text):
        folder, filename = _split_file(m["path"])
        return Location("ssh", raw, folder or "/", filename, user=m["user"], host=m["host"])
    path = os.path.abspath(os.path.expanduser(text))
    if os.path.isfile(path):
        return Location("local", raw, os.path.dirname(path), os.path.basename(path))
    return Location("local", raw, path, None)


def open_source(location: str | os.PathLike[str] | Location, *, endpoint: str | None = None,
                token: str | bool | None = None):
    """Open the :class:`~eaglekit.sources.base.Source` for a location; returns ``(source, parsed)``.

    ``endpoint`` and ``token`` apply to ``hf://`` locations (defaults: HF_ENDPOINT, HF_TOKEN).
    """
    loc = location if isinstance(location, Location) else parse_location(location)
    if loc.kind == "local":
        from eaglekit.io.sources.local import LocalSource

        return LocalSource(loc.folder, display=loc.raw), loc
    if loc.kind == "hub":
        from eaglekit.io.sources.hub import HubSource

        return HubSource(loc.repo_id, loc.folder, revision=loc.revision, endpoint=endpoint, token=token,
                         display=loc.raw), loc
    if loc.kind == "http":
        from eaglekit.io.sources.http import HttpSource

        return HttpSource(loc.folder, display=loc.raw, query={loc.filename: loc.query} if loc.query else None), loc
    from eaglekit.io.sources.ssh import SshSource

    return SshSource(loc.host, loc.folder, user=loc.user, port=loc.port, display=loc.raw), loc
