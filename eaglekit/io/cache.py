"""The result cache: an expensive answer (an accept length, trees, a dump's figures) computed once per content.

An entry is keyed by what was measured, by content: every local file the answer read (the drafter's and the
target's folders, the prompts, the dump) by its SHA-256, every option that changes the answer, a version of
the measuring code (bumped when the maths changes), eaglekit's and torch's versions. Change one byte of a
prompt file and the key changes; copy a folder elsewhere and it does not. A file's digest is remembered
against its (device, inode, size, mtime, ctime), as git's index does, so a repeat pays a ``stat``, not a read.

Where: ``$EAGLEKIT_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/eaglekit`` (``~/.cache/eaglekit``); a
``cache_dir=`` argument or ``--cache-dir`` overrides both. The store is diskcache's (SQLite index, entries
evicted least-recently-stored past :data:`SIZE_LIMIT`; docs/performance.md says why), with a disk that holds
only zlib-compressed JSON: an entry is read by a bounded, strict decoder (:mod:`eaglekit.core.records`) and a
corrupt or foreign one is dropped and recomputed, never trusted. Nothing is unpickled.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import stat
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.records import RecordError, decode, encode
from eaglekit.core.version import __version__

ENV = "EAGLEKIT_CACHE_DIR"
#: what the store keeps before evicting its oldest entries
SIZE_LIMIT = 2 * 1024 ** 3
#: one entry, compressed and as JSON: results are figures, not tensors
MAX_ENTRY_BYTES = 64 * 1024 ** 2
#: a folder with more files than this is not keyed (and its answer not cached): reading it all would cost more
MAX_FILES = 20_000
#: a file up to this size is keyed by the SHA-256 of every byte; a larger one (a checkpoint shard: hashing a 600 GB
#: target on first use would cost more than the measurement) by its size, mtime and its first and last MiB
FULL_HASH_BYTES = 256 * 1024 ** 2
EDGE_BYTES = 1024 ** 2
#: the store's own folder inside the cache folder; its layout version
STORE = "results-v1"


def default_dir() -> Path:
    """``$EAGLEKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/eaglekit``, else ``~/.cache/eaglekit``."""
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "eaglekit"


@dataclass(frozen=True)
class Cached:
    """What a cached answer says of itself: when it was computed, and where it is kept."""

    computed_at: str
    store: str

    def text(self) -> str:
        return f"cached: computed {self.computed_at} (--no-cache recomputes)"

    def to_json(self) -> dict[str, Any]:
        return {"cached": True, "computed_at": self.computed_at, "cache_dir": self.store}


def _json_disk():
    import diskcache

    class JsonDisk(diskcache.Disk):
        """diskcache's disk, holding only zlib-compressed JSON bytes: no pickle in, none out."""

        def store(self, value, read, key=diskcache.UNKNOWN):
            if not isinstance(value, bytes):
                raise TypeError("the result cache stores encoded bytes only")
            return super().store(value, read, key=key)

        def remove(self, file_path):
            """Only a file this store names itself (``ab/cd/<28 hex>.val``, inside it): a planted row that names
            ``../x`` or ``/home/...`` must not make a dropped entry delete another file."""
            if isinstance(file_path, str) and _ENTRY_FILE.fullmatch(file_path):
                super().remove(file_path)

        def fetch(self, mode, filename, value, read):
            if mode == diskcache.core.MODE_RAW and isinstance(value, bytes):
                data = value
            elif mode == diskcache.core.MODE_BINARY and isinstance(filename, str):
                data = _read_entry_file(Path(self._directory), filename)
            else:
                raise RecordError(f"entry of mode {mode}: not one this store writes")
            return data

    return JsonDisk


#: the names diskcache gives entry files (two levels of hex folders, 28 hex digits): nothing else is read or removed
_ENTRY_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")


def _read_entry_file(root: Path, name: str) -> bytes:
    """An entry's file, only if this store named it, a regular file inside the store, not through a link, bounded."""
    if not _ENTRY_FILE.fullmatch(name):
        raise RecordError("entry file not named by this store")
    path = root / name
    if any(p.is_symlink() for p in (path.parent, path.parent.parent)):
        raise RecordError("entry file behind a link")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise RecordError(f"entry file unreadable: {e}") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_ENTRY_BYTES:
            raise RecordError("entry file is not a bounded regular file")
        return f.read(MAX_ENTRY_BYTES + 1)


def _pack(record: dict[str, Any]) -> bytes:
    return zlib.compress(json.dumps(record, allow_nan=False, separators=(",", ":")).encode(), 6)


def _unpack(data: bytes) -> dict[str, Any]:
    if len(data) > MAX_ENTRY_BYTES:
        raise RecordError("entry too large")
    d = zlib.decompressobj()
    try:
        raw = d.decompress(data, MAX_ENTRY_BYTES)
    except zlib.error as e:
        raise RecordError(f"entry is not compressed JSON: {e}") from e
    if d.unconsumed_tail:
        raise RecordError("entry expands past the limit")

    def no_constants(name):
        raise RecordError(f"non-JSON constant {name}")
    try:
        out = json.loads(raw, parse_constant=no_constants)
    except (ValueError, RecursionError) as e:
        raise RecordError(f"entry is not JSON: {e}") from e
    if not isinstance(out, dict):
        raise RecordError("entry is not an object")
    return out


class ResultCache:
    """The store under ``directory`` (default :func:`default_dir`). ``get``/``put`` take a key from :func:`key`.

    A store that cannot be opened (a read-only home, a corrupt index) is not fatal: every answer is then computed,
    and :attr:`problem` says why."""

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory is not None else default_dir()
        self.problem: str | None = None
        self._store = None
        try:
            import diskcache

            self._store = diskcache.Cache(str(self.directory / STORE), size_limit=SIZE_LIMIT, disk=_json_disk(),
                                          eviction_policy="least-recently-stored", timeout=60)
        except Exception as e:  # noqa: BLE001  (sqlite3, OS errors: the answer is computed, not cached)
            self.problem = f"result cache at {self.directory} unusable ({type(e).__name__}: {e}); computing afresh"

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def get(self, key: str) -> tuple[Any, Cached] | None:
        """The decoded record and its provenance, or None (absent, corrupt or foreign: a bad entry is dropped)."""
        if self._store is None:
            return None
        try:
            data = self._store.get(key)
        except RecordError:
            self._drop(key)
            return None
        except Exception:  # noqa: BLE001  (an index row that cannot be read is a missing entry)
            return None
        if data is None:
            return None
        try:
            record = _unpack(data)
            if record.get("format") != STORE or record.get("key") != key or not isinstance(record.get("at"), str):
                raise RecordError("entry written for another key or format")
            value = decode(record.get("value"))
        except RecordError:
            self._drop(key)
            return None
        return value, Cached(record["at"], str(self.directory))

    def put(self, key: str, value: Any) -> bool:
        """Keep ``value`` (a registered record) under ``key``; False when it cannot be encoded or stored."""
        if self._store is None:
            return False
        try:
            at = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            data = _pack({"format": STORE, "key": key, "at": at, "eaglekit": __version__, "value": encode(value)})
        except (TypeError, ValueError):
            return False
        if len(data) > MAX_ENTRY_BYTES:
            return False
        try:
            return bool(self._store.set(key, data))
        except Exception:  # noqa: BLE001
            return False

    def _drop(self, key: str) -> None:
        try:
            self._store.delete(key)
        except Exception:  # noqa: BLE001
            pass

    # -- digests, remembered against a file's stat ------------------------------------------------------------
    def file_digest(self, path: str | os.PathLike[str]) -> str:
        """SHA-256 of a regular file's bytes, or for a file past :data:`FULL_HASH_BYTES` of its size, mtime and both
        ends (remembered against its device, inode, size, mtime and ctime)."""
        p = Path(path)
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise _NotKeyable(f"{p} is not a regular file")
        memo = f"digest:{os.path.abspath(p)}:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
        if self._store is not None:
            try:
                known = self._store.get(memo)
                if isinstance(known, bytes) and len(known) == 64:
                    return known.decode("ascii")
            except Exception:  # noqa: BLE001
                pass
        with open(p, "rb") as f:
            if st.st_size <= FULL_HASH_BYTES:
                digest = hashlib.file_digest(f, "sha256").hexdigest()
            else:  # a checkpoint shard: its size, mtime and both ends, not every byte (bounded time on any size)
                h = hashlib.sha256(f"large:{st.st_size}:{st.st_mtime_ns}:".encode())
                h.update(f.read(EDGE_BYTES))
                f.seek(st.st_size - EDGE_BYTES)
                h.update(f.read(EDGE_BYTES))
                digest = h.hexdigest()
        if self._store is not None:
            try:
                self._store.set(memo, digest.encode("ascii"))
            except Exception:  # noqa: BLE001
                pass
        return digest

    def location_digest(self, location: Any) -> str:
        """Digest of a local file, or of a folder's every file (relative names and contents); anything else (a Hub
        repo, a URL, an SSH host) raises :class:`_NotKeyable`."""
        if isinstance(location, (str, os.PathLike)):
            p = Path(location).expanduser()
            if p.is_file():
                return "file:" + self.file_digest(p)
            if p.is_dir():
                h = hashlib.sha256()
                for rel, full in _files(p):
                    h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + self.file_digest(full).encode() + b"\n")
                return "dir:" + h.hexdigest()
        raise _NotKeyable(f"{location!r} is not a local file or folder")


class _NotKeyable(Exception):
    """An input the cache cannot key by content: the answer is computed and not cached."""


def _files(root: Path) -> Iterable[tuple[str, Path]]:
    out = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            full = Path(folder) / name
            out.append((full.relative_to(root).as_posix(), full))
            if len(out) > MAX_FILES:
                raise _NotKeyable(f"{root} holds more than {MAX_FILES} files")
    out.sort()
    return [(rel, full) for rel, full in out if full.is_file()]


def key(kind: str, version: int, parts: dict[str, Any]) -> str:
    """The entry key: ``kind`` (what is measured), the measuring code's ``version`` and the parts, as one SHA-256
    of canonical JSON (with eaglekit's and torch's versions, which can move the last bits of a figure)."""
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        torch_version = installed("torch")  # not imported: a cached answer is read without loading torch
    except PackageNotFoundError:  # pragma: no cover - eaglekit needs torch to measure
        torch_version = None
    doc = {"kind": kind, "version": version, "eaglekit": __version__, "torch": torch_version, "parts": parts}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=_not_json)
    return f"{kind}:{hashlib.sha256(text.encode()).hexdigest()}"


def _not_json(value):
    raise _NotKeyable(f"{type(value).__name__} in a cache key")


def cached_call(kind: str, version: int, parts: Callable[[ResultCache], dict[str, Any]] | None,
                compute: Callable[[], Any], *, cache: bool | str = True,
                cache_dir: str | os.PathLike[str] | None = None, stamp: Callable[[Any, Cached], Any] | None = None):
    """``compute()``, or its cached answer. ``parts(store)`` gives the key's parts (None, or raising
    :class:`_NotKeyable`: computed and not cached). ``cache``: True (read and write), False (neither),
    ``"refresh"`` (recompute and write). ``stamp(value, cached)`` marks a value read from the cache."""
    if cache not in (True, False, "refresh"):
        raise InputError(f"cache must be True, False or 'refresh', got {cache!r}.")
    if cache is False or parts is None:
        return compute()
    store = ResultCache(cache_dir)
    try:
        try:
            k = key(kind, version, parts(store))
        except (_NotKeyable, OSError):
            return compute()
        if cache is True:
            hit = store.get(k)
            if hit is not None:
                value, cached = hit
                return stamp(value, cached) if stamp is not None else value
        value = compute()
        store.put(k, value)
        return value
    finally:
        store.close()
