"""A read-only, Hub-compatible HTTP server over a folder of model repos, for tests and the offline demo.

Layout: ``ROOT/OWNER/REPO/<files>``. An optional ``ROOT/OWNER/REPO/.hub.json`` holds repo metadata:
tags, downloads, likes, lastModified, createdAt (ISO 8601), pipeline_tag, library_name, cardData,
gated (false | "auto" | "manual") and private. Names beginning with "." are not part of a repo.

The endpoints are the ones huggingface_hub 2.4 calls (hf_api.py, file_download.py, hf_file_system.py,
utils/_http.py, utils/_pagination.py), answered the way huggingface.co answers them:

=================================  ================================================================
GET  /api/models                   list_models: search, author, filter, pipeline_tag, gated, sort,
                                   direction, limit, full, config, cardData, expand; Link pages
GET  /api/models/O/R[/revision/V]  model_info, repo_info (HfFileSystem): expand, blobs
GET  /api/models/O/R/tree/V[/P]    list_repo_tree, HfFileSystem.ls: recursive, expand; Link pages
POST /api/models/O/R/paths-info/V  get_paths_info, HfFileSystem.info: form or JSON ``paths``
HEAD|GET /O/R/resolve/V/P          hf_hub_download, get_hf_file_metadata, HfFileSystem.open: one
                                   byte range, ETag, X-Repo-Commit, X-Linked-Etag/-Size (LFS)
HEAD|GET /files/RELPATH            the plain static server of :mod:`eaglekit.demo.fileserver`
=================================  ================================================================

Where this differs from the Hub, or where the Hub surprises: files are served directly (200/206),
never redirected to a CDN; the client takes its metadata from X-Linked-* or ETag/Content-Length
either way. Revisions are "main" and the commit sha only. A missing or private repo answers 401
RepoNotFound without a token and 404 with one, as the Hub does so that private repos do not leak.
Gating guards file content (resolve) only: as on the Hub, the metadata and tree of a gated repo
are public. ``config`` is the summary the Hub computes (architectures, model_type, quant_method),
not the whole config.json, unless ``full_config=True``. Pagination cursors are plain offsets.

Standard library only, on purpose: a test and demo fixture must not add a dependency (the HTTP
plumbing is in :mod:`eaglekit.demo.fileserver`, on http.server's ThreadingHTTPServer).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode

from eaglekit.core.errors import EaglekitError, InputError
from eaglekit.demo.fileserver import FileHandler, FileServer, HttpError, RequestRecord
from eaglekit.core.checkpoint.header import PREFIX_BYTES, header_length, parse_header

__all__ = ["HubServer", "RequestRecord", "serve"]

_LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".onnx", ".h5", ".msgpack")
_NAME_RE = re.compile(r"[A-Za-z0-9][\w.-]*", re.ASCII)
_CHUNK = 1 << 20
# The properties the Hub returns when `expand` is not given: list default, list full, model_info.
_LIST_FIELDS = ("author", "likes", "private", "downloads", "tags", "pipeline_tag", "library_name", "createdAt")
_FULL_FIELDS = (*_LIST_FIELDS, "sha", "lastModified", "gated", "disabled", "siblings")
_INFO_FIELDS = (*_FULL_FIELDS, "cardData", "config", "safetensors", "usedStorage", "spaces")
_SORT_KEYS = ("downloads", "likes", "lastModified", "createdAt")


@dataclass(frozen=True)
class _Repo:
    id: str
    folder: Path
    files: dict[str, os.stat_result]  # path in repo ("/"-separated) -> stat
    meta: dict
    sha: str

    @property
    def dirs(self) -> set[str]:
        return {"/".join(p.split("/")[:i]) for p in self.files for i in range(1, p.count("/") + 1)}


def _load_repo(root: Path, owner: str, name: str) -> _Repo | None:
    """Scan ROOT/OWNER/NAME, or None when that is not a repo folder. The commit sha hashes the sorted
    (path, size, mtime) of every file: it changes whenever a file does."""
    folder = root / owner / name
    if not (_NAME_RE.fullmatch(owner) and _NAME_RE.fullmatch(name) and folder.is_dir()):
        return None
    real_root = os.path.realpath(root)
    if not _inside(os.path.realpath(folder), real_root):  # a repo folder linked out of ROOT is no repo
        return None
    files = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for filename in filenames:
            full = os.path.join(dirpath, filename)
            try:
                st = os.stat(full)
            except OSError:
                continue
            if not filename.startswith(".") and stat.S_ISREG(st.st_mode) \
                    and _inside(os.path.realpath(full), real_root):  # never a link out of ROOT (/etc/passwd)
                files[os.path.relpath(full, folder).replace(os.sep, "/")] = st
    meta_path = folder / ".hub.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    stamp = repr(sorted((p, s.st_size, s.st_mtime_ns) for p, s in files.items()))
    return _Repo(f"{owner}/{name}", folder, files, meta, hashlib.sha1(stamp.encode()).hexdigest())


def _stamp(root: Path, owner: str, name: str, repo: _Repo | None) -> tuple:
    """What a rescan would notice, by stat alone: the repo folder and its subfolders (files added,
    removed or renamed change their mtime), .hub.json, and every file the scan kept (rewritten in place)."""
    folder = os.path.join(root, owner, name)

    def st(path: str) -> tuple[int, int] | None:
        try:
            s = os.stat(path)
        except OSError:
            return None
        return s.st_mtime_ns, s.st_size

    if repo is None:
        return (st(folder),)
    dirs = sorted({"", *repo.dirs})
    return (tuple(st(os.path.join(folder, d)) for d in dirs), st(os.path.join(folder, ".hub.json")),
            tuple(st(os.path.join(folder, p)) for p in sorted(repo.files)))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


@functools.lru_cache(maxsize=4096)
def _digest(path: str, size: int, mtime_ns: int, kind: str) -> str:
    """sha256 of a file ("sha256"), or its git blob id ("git"); size and mtime only key the cache."""
    h = hashlib.sha256() if kind == "sha256" else hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _blob(repo: _Repo, rel: str) -> tuple[str, dict | None]:
    """(git blob id, LFS info or None) of a file, as the Hub reports them; LFS files get a pointer."""
    st, path = repo.files[rel], str(repo.folder / rel)
    if not rel.endswith(_LFS_SUFFIXES):
        return _digest(path, st.st_size, st.st_mtime_ns, "git"), None
    sha256 = _digest(path, st.st_size, st.st_mtime_ns, "sha256")
    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {st.st_size}\n".encode()
    blob_id = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
    return blob_id, {"oid": sha256, "size": st.st_size, "pointerSize": len(pointer)}


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _modified(repo: _Repo) -> str:
    mtimes = [s.st_mtime for s in repo.files.values()] or [repo.folder.stat().st_mtime]
    return repo.meta.get("lastModified") or _iso(max(mtimes))


def _config(repo: _Repo, full: bool) -> dict | None:
    """config.json as the Hub summarises it in model_info (or whole, with full=True)."""
    if "config.json" not in repo.files:
        return None
    try:
        config = json.loads((repo.folder / "config.json").read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or full:
        return config if isinstance(config, dict) else None
    out = {k: config[k] for k in ("architectures", "model_type") if k in config}
    quant = config.get("quantization_config")
    if isinstance(quant, dict) and "quant_method" in quant:
        out["quantization_config"] = {"quant_method": quant["quant_method"]}
    return out


def _safetensors(repo: _Repo) -> dict | None:
    """{"parameters": {dtype: count}, "total": n} over the root *.safetensors files; unreadable
    headers are skipped, as the Hub omits what it cannot parse."""

    params: dict[str, int] = {}
    for rel in sorted(p for p in repo.files if "/" not in p and p.endswith(".safetensors")):
        path = repo.folder / rel
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                prefix = f.read(PREFIX_BYTES)
                data = prefix + f.read(header_length(prefix, file_size=size, filename=rel))
            counts = [(t.dtype, t.parameters) for t in parse_header(data, file_size=size, filename=rel).tensors]
        except (OSError, EaglekitError):
            continue
        for dtype, count in counts:
            params[dtype] = params.get(dtype, 0) + count
    return {"parameters": params, "total": sum(params.values())} if params else None


def _model_json(repo: _Repo, fields: Iterable[str], *, blobs: bool = False, full_config: bool = False) -> dict:
    """One model as /api/models answers it: id plus the requested properties that have a value."""
    meta = repo.meta

    def siblings() -> list[dict]:
        out = []
        for rel in sorted(repo.files):
            sibling: dict = {"rfilename": rel}
            if blobs:
                blob_id, lfs = _blob(repo, rel)
                sibling.update(size=repo.files[rel].st_size, blobId=blob_id)
                if lfs:
                    sibling["lfs"] = {"size": lfs["size"], "sha256": lfs["oid"], "pointerSize": lfs["pointerSize"]}
            out.append(sibling)
        return out

    getters = {
        "author": lambda: repo.id.split("/")[0],
        "sha": lambda: repo.sha,
        "lastModified": lambda: _modified(repo),
        "createdAt": lambda: meta.get("createdAt") or _modified(repo),
        "private": lambda: bool(meta.get("private", False)),
        "gated": lambda: meta.get("gated", False),
        "disabled": lambda: False,
        "downloads": lambda: meta.get("downloads", 0),
        "likes": lambda: meta.get("likes", 0),
        "tags": lambda: list(meta.get("tags", [])),
        "pipeline_tag": lambda: meta.get("pipeline_tag"),
        "library_name": lambda: meta.get("library_name"),
        "cardData": lambda: meta.get("cardData"),
        "config": lambda: _config(repo, full_config),
        "siblings": siblings,
        "safetensors": lambda: _safetensors(repo),
        "usedStorage": lambda: sum(s.st_size for s in repo.files.values()),
        "spaces": lambda: [],
    }
    out = {"_id": repo.sha[:24], "id": repo.id}
    for name in fields:
        value = getters[name]() if name in getters else None
        if value is not None:
            out[name] = value
    return out


def _expand(query: dict) -> list[str]:
    values = query.get("expand", []) + query.get("expand[]", [])
    return [v for value in values for v in value.split(",") if v]


def _flag(query: dict, name: str) -> bool:
    return query.get(name, ["false"])[-1].lower() in ("1", "true")


class _HubHandler(FileHandler):
    server_version = "eaglekit-hubserver"

    @property
    def hub(self) -> HubServer:
        return self.server.app  # type: ignore[return-value]

    def _route(self, path: str, query: str, body: bytes) -> None:
        parts = [unquote(p) for p in path.split("/")[1:]]
        q = parse_qs(query, keep_blank_values=True)
        if parts[:2] == ["api", "models"] and len(parts) == 2:
            return self._list_models(q, path, query)
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo, rest = self._repo(parts[2], parts[3]), parts[4:]
            if not rest or (rest[0] == "revision" and len(rest) == 2):
                return self._model_info(repo, rest[1] if rest else "main", q)
            if rest[0] == "tree" and len(rest) >= 2:
                return self._tree(repo, rest[1], "/".join(rest[2:]).strip("/"), q, path, query)
            if rest[0] == "paths-info" and len(rest) == 2:
                return self._paths_info(repo, rest[1], body)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(self._repo(parts[0], parts[1]), parts[3], "/".join(parts[4:]))
        if path.startswith("/files/"):
            return super()._route(path, query, body)
        raise HttpError(404, "Sorry, we can't find the page you are looking for.")

    def _list_models(self, q: dict, path: str, query: str) -> None:
        self._need("GET")
        token_ok = self._token_ok()
        repos = [r for r in self.hub._repos() if token_ok or not r.meta.get("private")]
        for needle in q.get("search", []):
            repos = [r for r in repos if needle.lower() in r.id.lower()]
        for author in q.get("author", []):
            repos = [r for r in repos if r.id.split("/")[0] == author]
        for tag in q.get("filter", []):
            repos = [r for r in repos if tag in (*r.meta.get("tags", []), r.meta.get("library_name"))]
        for pipeline in q.get("pipeline_tag", []):
            repos = [r for r in repos if r.meta.get("pipeline_tag") == pipeline]
        if "gated" in q:
            repos = [r for r in repos if bool(r.meta.get("gated")) == _flag(q, "gated")]
        if (sort := q.get("sort", [""])[-1]) in _SORT_KEYS:
            ascending = q.get("direction", ["-1"])[-1] == "1"
            key = {"lastModified": _modified, "createdAt": lambda r: r.meta.get("createdAt") or _modified(r)}.get(
                sort, lambda r: r.meta.get(sort, 0))
            repos.sort(key=key, reverse=not ascending)
        if (limit := q.get("limit", [""])[-1]).isdigit():
            repos = repos[: int(limit)]
        fields = _expand(q) or [*(_FULL_FIELDS if _flag(q, "full") else _LIST_FIELDS),
                                *(["config"] if _flag(q, "config") else []),
                                *(["cardData"] if _flag(q, "cardData") else [])]
        page, headers = self._paginate(repos, q, path, query)
        self._send_json([_model_json(r, fields, full_config=self.hub.full_config) for r in page], headers)

    def _model_info(self, repo: _Repo, rev: str, q: dict) -> None:
        self._need("GET")
        self._check_rev(repo, rev)
        fields = _expand(q) or _INFO_FIELDS
        self._send_json(_model_json(repo, fields, blobs=_flag(q, "blobs"), full_config=self.hub.full_config))

    def _tree(self, repo: _Repo, rev: str, base: str, q: dict, path: str, query: str) -> None:
        self._need("GET")
        self._check_rev(repo, rev)
        if base and base not in repo.dirs:
            raise HttpError(404, f'{base} does not exist on "{rev}"', "EntryNotFound", {"X-Repo-Commit": repo.sha})
        prefix, recursive = base + "/" if base else "", _flag(q, "recursive")
        names = sorted(p for p in (*repo.dirs, *repo.files)
                       if p.startswith(prefix) and (recursive or "/" not in p[len(prefix):]))
        page, headers = self._paginate(names, q, path, query)
        self._send_json([self._entry(repo, p, _flag(q, "expand")) for p in page], headers)

    def _paths_info(self, repo: _Repo, rev: str, body: bytes) -> None:
        self._need("POST")
        self._check_rev(repo, rev)
        if "json" in self.headers.get("Content-Type", ""):
            try:
                data = json.loads(body or b"{}")
            except ValueError as e:
                raise HttpError(400, f"Invalid JSON body: {e}") from e
            paths, expand = data.get("paths", []), bool(data.get("expand"))
        else:
            form = parse_qs(body.decode(), keep_blank_values=True)
            paths, expand = form.get("paths", []), _flag(form, "expand")
        known = repo.dirs | repo.files.keys()
        self._send_json([self._entry(repo, p.strip("/"), expand) for p in paths if p.strip("/") in known])

    def _resolve(self, repo: _Repo, rev: str, rel: str) -> None:
        self._need("GET", "HEAD")
        if repo.meta.get("gated") and not self._token_ok():
            if self.headers.get("Authorization"):
                message = (f"Access to model {repo.id} is restricted and you are not in the authorized list. "
                           f"Visit {self.hub.endpoint}/{repo.id} to ask for access.")
                raise HttpError(403, message, "GatedRepo")
            message = (f"Access to model {repo.id} is restricted. You must have access to it and be "
                       "authenticated to access it. Please log in.")
            raise HttpError(401, message, "GatedRepo")
        self._check_rev(repo, rev)
        if rel not in repo.files:
            raise HttpError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": repo.sha})
        blob_id, lfs = _blob(repo, rel)
        headers = {"X-Repo-Commit": repo.sha, "ETag": f'"{lfs["oid"] if lfs else blob_id}"'}
        if lfs:
            headers.update({"X-Linked-Etag": f'"{lfs["oid"]}"', "X-Linked-Size": str(lfs["size"])})
        self._send_file(repo.folder / rel, repo.files[rel].st_size, headers)

    def _repo(self, owner: str, name: str) -> _Repo:
        repo = self.hub.repo(owner, name)
        if repo is None or (repo.meta.get("private") and not self._token_ok()):
            status = 404 if self.headers.get("Authorization") else 401
            raise HttpError(status, "Repository not found", "RepoNotFound")
        return repo

    def _token_ok(self) -> bool:
        scheme, _, token = self.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and token.strip() in self.hub.tokens

    def _check_rev(self, repo: _Repo, rev: str) -> None:
        if rev not in ("main", repo.sha):
            raise HttpError(404, f"Invalid rev id: {rev}", "RevisionNotFound")

    def _entry(self, repo: _Repo, rel: str, expand: bool) -> dict:
        if rel in repo.files:
            blob_id, lfs = _blob(repo, rel)
            entry = {"type": "file", "oid": blob_id, "size": repo.files[rel].st_size, "path": rel}
            entry.update({"lfs": lfs} if lfs else {})
        else:
            tree_id = hashlib.sha1(f"{repo.sha}:{rel}".encode()).hexdigest()
            entry = {"type": "directory", "oid": tree_id, "size": 0, "path": rel}
        if expand:
            entry["lastCommit"] = {"id": repo.sha, "title": "Snapshot served by eaglekit", "date": _modified(repo)}
        return entry

    def _paginate(self, items: list, q: dict, path: str, query: str) -> tuple[list, dict]:
        """One page of at most ``page_size`` items, and a Link header to the next (cursor = offset)."""
        cursor = q.get("cursor", ["0"])[-1]
        if not cursor.isdigit():
            raise HttpError(400, f"Invalid cursor: {cursor}")
        start, size = int(cursor), self.hub.page_size
        page = items[start : start + size]
        if start + size >= len(items):
            return page, {}
        pairs = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "cursor"]
        host = self.headers.get("Host") or self.hub.endpoint.removeprefix("http://")
        return page, {"Link": f'<http://{host}{path}?{urlencode([*pairs, ("cursor", start + size)])}>; rel="next"'}


class HubServer(FileServer):
    """A Hub-compatible server over ``root`` on ``host:port`` (0 picks a free port); see the module doc.

    ``tokens``: bearer tokens that may read private and gated repos. ``page_size``: items per page of
    list_models and tree (the Hub uses 1000). ``full_config``: serve the whole config.json as
    ``config`` instead of the Hub's summary. The request log and fault injection (``log``,
    ``clear_log()``, ``ignore_range``, ``inject()``) come from :class:`eaglekit.demo.fileserver.FileServer`.
    """

    handler = _HubHandler

    def __init__(self, root: str | Path, *, host: str = "127.0.0.1", port: int = 0, tokens: Iterable[str] = (),
                 page_size: int = 1000, quiet: bool = True, full_config: bool = False) -> None:
        super().__init__(root, host=host, port=port, quiet=quiet)
        if page_size < 1:
            raise InputError(f"page_size must be at least 1, got {page_size}.")
        self.tokens, self.page_size, self.full_config = frozenset(tokens), page_size, full_config
        self._scanned: dict[tuple[str, str], tuple[_Repo | None, tuple]] = {}
        self._scan_lock = threading.Lock()

    def repo(self, owner: str, name: str) -> _Repo | None:
        """ROOT/OWNER/NAME as a repo, scanned once: a later request only stats what the scan saw (the
        folders, .hub.json and each file; no walk, no link resolution, no hashing) and scans again when
        any of it changed, so a file written, added or removed is served as a new commit."""
        key = (owner, name)
        with self._scan_lock:
            cached = self._scanned.get(key)
        if cached is not None and _stamp(self.root, owner, name, cached[0]) == cached[1]:
            return cached[0]
        repo = _load_repo(self.root, owner, name)
        stamp = _stamp(self.root, owner, name, repo)
        with self._scan_lock:
            self._scanned[key] = (repo, stamp)
        return repo

    def _repos(self) -> Iterator[_Repo]:
        for owner in sorted(os.listdir(self.root)):
            if (self.root / owner).is_dir():
                for name in sorted(os.listdir(self.root / owner)):
                    if (repo := self.repo(owner, name)) is not None:
                        yield repo


def serve(root: str | Path, *, host: str = "127.0.0.1", port: int = 8765, tokens: Iterable[str] = (),
          quiet: bool = False) -> None:
    """Serve ``root`` until Ctrl-C (``eaglekit serve-hub``), printing the endpoint and how to use it."""
    with HubServer(root, host=host, port=port, tokens=tokens, quiet=quiet) as server:
        try:  # the prints too: a caller may press Ctrl-C as soon as it reads the endpoint
            count = sum(1 for _ in server._repos())
            print(f"Serving {count} repos from {server.root} at {server.endpoint} (Ctrl-C stops)", flush=True)
            print(f"  export HF_ENDPOINT={server.endpoint}", flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
