"""One grammar for checkpoint locations, shared by the library, the notebooks and the CLI.

=============================================  =============================================
``/data/drafter`` or ``./model.safetensors``   a local folder or file
``hf://OWNER/REPO[@REVISION][/PATH]``           a Hub repo (honours HF_ENDPOINT and HF_TOKEN)
``https://host/dir/model.safetensors``         any HTTP server that honours byte ranges
``ssh://[user@]host[:port]/abs/path``          a host over SSH (SFTP), ~/.ssh/config aware
``[user@]host:/abs/path``                      the same, scp-style
=============================================  =============================================

A location names either a file (``*.safetensors``, ``*.index.json``, ``config.json``) or a folder.
Parsing is pure; :func:`eaglekit.io.sources.open_source` turns a location into a byte source.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from eaglekit.core.errors import LocationError
from eaglekit.core.redact import redact_text, redact_url, shown

LocationKind = Literal["local", "hub", "http", "ssh"]

_HF_RE = re.compile(r"^hf://(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+)(?:@(?P<rev>refs/(?:pr|convert)/[^/]+|[^/]+))?(?:/(?P<path>.*))?$")
_SCP_RE = re.compile(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>[\w.-]+):(?P<path>/.*)$")
_FILE_SUFFIXES = (".safetensors", ".json")
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
# huggingface_hub's validate_repo_id: ASCII word characters, "-" and "."; 1-96 of them; starting and
# ending with a letter, digit or "_"; no "--" or ".."; not ending in ".git".
_REPO_PART_RE = re.compile(r"(?=[A-Za-z0-9_])[A-Za-z0-9_.-]{1,96}(?<=[A-Za-z0-9_])")
# What OpenSSH's valid_hostname() refuses (ssh.c): a leading "-", whitespace, controls and shell
# metacharacters. Such a name would reach a ProxyCommand's %h as extra words.
_SSH_HOST_BAD = re.compile(r"^-|[\s'`\"$\\;&<>|(){},\x00-\x1f\x7f]")


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` when the Hub would accept it as OWNER/NAME, else LocationError saying why."""
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    bad = len(parts) != 2 or not all(_REPO_PART_RE.fullmatch(p) for p in parts) \
        or "--" in repo_id or ".." in repo_id or repo_id.endswith(".git")
    if bad:
        raise LocationError(f"Invalid Hub repo id {shown(repo_id)!r}: expected OWNER/NAME, each 1 to 96 letters, "
                            "digits, '_', '-' or '.', not starting or ending with '-' or '.', without '--' or '..', "
                            "not ending in '.git'.")
    return repo_id


def check_hub_path(path: str, what: str, repo_id: str) -> str:
    """A path in a repo or a revision, refusing ``..`` and ``.`` segments (an HTTP client resolves them
    before sending, so ``a/../../other/repo`` would read another repo under this one's name)."""
    if any(seg in (".", "..") for seg in re.split(r"[/\\]", path)) and path:
        raise LocationError(f"Hub location hf://{shown(repo_id)}: the {what} {shown(path)!r} has a '.' or '..' "
                            "segment; name files inside the repo directly.")
    return path


def check_ssh_host(host: str) -> str:
    """``host`` when OpenSSH would accept it as a host name, else LocationError."""
    if not host or _SSH_HOST_BAD.search(host):
        raise LocationError(f"Invalid SSH host name {shown(host)!r}: OpenSSH refuses names with spaces, quotes, "
                            "shell characters or a leading '-'.")
    return host


def _split_url(text: str, raw: str):
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number)
    except ValueError as e:
        raise LocationError(f"Malformed URL {shown(raw)!r}: {shown(e)}.") from e
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
        return self.raw  # already without credentials: see parse_location

    def __repr__(self) -> str:  # never a password or a signature
        hide = {"raw": redact_text, "folder": redact_text, "query": lambda q: "?<redacted>"}
        fields = ", ".join(f"{k}={hide[k](v) if k in hide else v!r}" for k, v in vars(self).items()
                           if v not in (None, ""))
        return f"Location({fields})"


def _split_file(path: str) -> tuple[str, str | None]:
    """Split ``dir/model.safetensors`` into (``dir``, ``model.safetensors``); a folder keeps None."""
    stripped = path.rstrip("/")
    head, _, tail = stripped.rpartition("/")
    if tail.endswith(_FILE_SUFFIXES):
        return head, tail
    return stripped, None


def parse_location(location: str | os.PathLike[str]) -> Location:
    """Parse a location string (pure: no I/O except asking whether a local path exists).

    ``raw`` keeps the location as given, minus credentials (an SSH password, an HTTP user:password or
    query signature): it is what messages and tables show. An HTTP location's ``folder`` and ``query``
    keep what the request needs."""
    raw = os.fspath(location)
    text = raw.strip()
    if not text:
        raise LocationError("Empty location: give a local path, hf://OWNER/REPO, an http(s):// URL or ssh://host/path.")
    if text.startswith("hf://"):
        m = _HF_RE.match(text)
        if not m:
            raise LocationError(f"Malformed Hub location {shown(raw)!r}: expected hf://OWNER/REPO[@REVISION][/PATH].")
        repo_id = check_repo_id(f"{m['owner']}/{m['repo']}")
        check_hub_path(m["rev"] or "", "revision", repo_id)
        check_hub_path(m["path"] or "", "path", repo_id)
        folder, filename = _split_file(m["path"] or "")
        return Location("hub", raw, folder, filename, repo_id=repo_id, revision=m["rev"])
    if text.startswith(("http://", "https://")):
        parts = _split_url(text, raw)
        if not parts.hostname:
            raise LocationError(f"Malformed URL {shown(raw)!r}: no host.")
        base = f"{parts.scheme}://{parts.netloc}"
        folder, filename = _split_file(parts.path)
        query = f"?{parts.query}" if parts.query and filename else ""  # e.g. a pre-signed URL's signature
        return Location("http", redact_url(raw), base + folder, filename, query=query)
    if text.startswith("ssh://"):
        shown_raw = _without_password(raw)
        if not text[6:].split("/", 1)[0] or "/" not in text[6:]:
            raise LocationError(f"Malformed SSH location {shown(shown_raw)!r}: expected ssh://[user@]host[:port]/abs/path.")
        try:
            parts = urlsplit(text)
            port = parts.port
        except ValueError as e:
            raise LocationError(f"Malformed SSH location {shown(shown_raw)!r}: the port is not a number.") from e
        if not parts.hostname:
            raise LocationError(f"Malformed SSH location {shown(shown_raw)!r}: expected ssh://[user@]host[:port]/abs/path.")
        folder, filename = _split_file(unquote(parts.path))
        return Location("ssh", shown_raw, folder or "/", filename, user=parts.username,
                        host=check_ssh_host(parts.hostname), port=port)
    scheme = _SCHEME_RE.match(text)
    if scheme:
        raise LocationError(f"Unsupported location scheme {shown(scheme.group(1))}:// in {shown(raw)!r}: use a local "
                            "path, hf://, http(s):// (a server honouring byte ranges) or ssh://.")
    m = _SCP_RE.match(text)
    if m and not os.path.exists(text):
        folder, filename = _split_file(m["path"])
        return Location("ssh", raw, folder or "/", filename, user=m["user"], host=check_ssh_host(m["host"]))
    path = os.path.abspath(os.path.expanduser(text))
    if os.path.isfile(path):
        return Location("local", raw, os.path.dirname(path), os.path.basename(path))
    return Location("local", raw, path, None)


def hub_hint(raw: str) -> str | None:
    """For a missing local path spelled like a Hub repo id (``OWNER/NAME``): the hf:// location it may mean."""
    text = str(raw)
    parts = text.split("/")
    if len(parts) == 2 and not text.startswith((".", "~")) and all(_REPO_PART_RE.fullmatch(p) for p in parts):
        return f"For the Hub repo {text}, write hf://{text}."
    return None


def _without_password(url: str) -> str:
    """``ssh://user:secret@host/...`` as ``ssh://user@host/...`` (SFTP logs in with keys, never a password)."""
    return re.sub(r"^(ssh://[^/@:]*):[^/@]*@", r"\1@", url)
