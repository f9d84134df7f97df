"""Open a checkpoint wherever it lives: resolve its files, read every header, stream tensor bytes.

Sources only fetch bytes (``eaglekit.io.sources``); this module decides which bytes. A header costs one
request when it fits the first window (a second only when it is larger), and the shards of a sharded
checkpoint are fetched in parallel threads.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from eaglekit.core.errors import ConfigError, HeaderError, LocationError, NotFoundError
from eaglekit.core.checkpoint.header import PREFIX_BYTES, FileHeader, header_length, parse_header
from eaglekit.core.redact import shown
from eaglekit.core.safejson import loads
from eaglekit.io.inventory import Inventory
from eaglekit.io.location import Location, parse_location
from eaglekit.io.sources import open_source
from eaglekit.io.sources.base import Source
from eaglekit.core.configs.config import load_config_bytes
from eaglekit.core.checkpoint.tensors import to_numpy, to_torch

#: The first read of every file. Drafter headers are a few KiB (a 64-shard index's shards, less);
#: huggingface_hub reads 100 kB. A generic 5 MiB read-ahead block would fetch 2,000x the header.
HEADER_WINDOW = 64 * 1024
INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
#: Threads fetching headers of shards at once (I/O bound: they wait on the network).
MAX_WORKERS = 16
#: Remote sources whose folder is probed for model.safetensors before anything is listed.
PROBE_KINDS = frozenset({"hub", "http"})
#: Bytes per read when streaming tensor data.
STREAM_CHUNK = 16 * 1024 * 1024


def read_header(source: Source, name: str, *, window: int = HEADER_WINDOW) -> FileHeader:
    """One request for the header when it fits ``window``; a second for the rest when it does not."""
    first = source.read(name, 0, window)
    what = f"{source.display} ({name})" if not source.display.endswith(name) else source.display
    n = header_length(first.data, file_size=first.file_size, filename=what)
    data = first.data
    if PREFIX_BYTES + n > len(data):
        rest = source.read(name, len(data), PREFIX_BYTES + n - len(data))
        data += rest.data
    return parse_header(data, file_size=first.file_size, filename=name, display=what)


def _safe_shard_name(name: object, index_what: str) -> str:
    """Shard names come from a file we do not control: refuse any that leave the folder."""
    if not isinstance(name, str) or not name:
        raise HeaderError(f"{index_what}: weight_map values must be file names, got {shown(repr(name)[:200])}.")
    norm = posixpath.normpath(name)
    if name.startswith(("/", "\\")) or "\\" in name or norm.startswith("..") or os.path.isabs(name) \
            or ":" in name.split("/")[0]:
        raise HeaderError(f"{index_what}: shard {shown(repr(name))} points outside the checkpoint folder; "
                          "an index may only name files beside it.")
    return norm


def _shards_from_index(raw: bytes, what: str) -> tuple[list[str], dict[str, str]]:
    index = loads(raw, what=what, error=HeaderError)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise HeaderError(f"{what} has no weight_map object mapping tensor names to shard files.")
    mapping = {str(k): _safe_shard_name(v, what) for k, v in weight_map.items()}
    return sorted(set(mapping.values())), mapping


def resolve_files(source: Source, loc: Location) -> tuple[list[str], dict[str, str] | None]:
    """Which safetensors files a location means, and the index's tensor->file map when sharded."""
    name = loc.filename
    if name and name.endswith(".index.json"):
        raw = source.read_small(name)
        if raw is None:
            raise NotFoundError(f"{source.display}: no such index file.")
        return _shards_from_index(raw, source.display)
    if name and name.endswith(".safetensors"):
        return [name], None
    if name and name != CONFIG_NAME:
        raise LocationError(f"{source.display} names {name}, which is not a checkpoint file: give a *.safetensors "
                            f"file, a {INDEX_NAME}, a config.json or the folder that holds them.")
    listing = source.list()
    if listing is not None and INDEX_NAME not in listing:
        return _from_listing(source, listing)
    raw = source.read_small(INDEX_NAME)
    if raw is not None:
        return _shards_from_index(raw, f"{source.display}/{INDEX_NAME}")
    return [SINGLE_NAME], None  # unlistable (HTTP): probe the conventional name; 404 says so


def _from_listing(source: Source, listing: list[str]) -> tuple[list[str], None]:
    """The safetensors files of a listed folder that has no index."""
    if SINGLE_NAME in listing:
        return [SINGLE_NAME], None
    found = [n for n in listing if n.endswith(".safetensors")]
    if not found:
        raise NotFoundError(f"{source.display}: no safetensors files here (expected {SINGLE_NAME}, "
                            f"{INDEX_NAME} or *.safetensors).")
    return found, None


def read_config(source: Source) -> dict[str, Any] | None:
    """The config.json beside the weights, or None when there is none."""
    raw = source.read_small(CONFIG_NAME)
    if raw is None:
        return None
    value = loads(raw, what=f"{source.display}/{CONFIG_NAME}", error=ConfigError)
    if not isinstance(value, dict):
        raise ConfigError(f"{source.display}/{CONFIG_NAME} must be a JSON object, got {type(value).__name__}.")
    return value


class Checkpoint:
    """An opened checkpoint: its :class:`Inventory` and byte-range access to its tensors.

    Use as a context manager (``with open_checkpoint(loc) as ckpt:``) to close connections.
    """

    def __init__(self, source: Source, location: Location, inventory: Inventory) -> None:
        self.source = source
        self.location = location
        self.inventory = inventory

    def __enter__(self) -> Checkpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.source.close()

    def __repr__(self) -> str:
        return f"Checkpoint({self.inventory.source!r}, {len(self.inventory)} tensors)"

    def read_bytes(self, name: str, start: int = 0, length: int | None = None) -> bytes:
        """Raw bytes of one tensor (or a slice of them), read by range."""
        t = self.inventory[name]
        length = t.nbytes - start if length is None else length
        if start < 0 or length < 0 or start + length > t.nbytes:
            raise ValueError(f"range [{start}, {start + length}) is outside tensor {name!r} ({t.nbytes} bytes)")
        if length == 0:
            return b""
        data = self.source.read(t.file, t.offset + start, length).data
        if len(data) != length:
            raise HeaderError(f"{self.inventory.source}: tensor {name!r} is truncated: read {len(data)} of "
                              f"{length} bytes (the file is shorter than its header says).")
        return data

    def read_into(self, name: str, start: int, buffer: bytearray | memoryview) -> int:
        """Bytes ``start .. start + len(buffer)`` of one tensor, written into ``buffer`` (reused by streamed
        reads: no allocation per block where the source supports it). Returns ``len(buffer)``."""
        t = self.inventory[name]
        length = len(buffer)
        if start < 0 or start + length > t.nbytes:
            raise ValueError(f"range [{start}, {start + length}) is outside tensor {name!r} ({t.nbytes} bytes)")
        if length == 0:
            return 0
        got = self.source.read_into(t.file, t.offset + start, buffer)
        if got != length:
            raise HeaderError(f"{self.inventory.source}: tensor {name!r} is truncated: read {got} of "
                              f"{length} bytes (the file is shorter than its header says).")
        return got

    def iter_bytes(self, name: str, *, chunk_bytes: int = STREAM_CHUNK, start: int = 0,
                   length: int | None = None) -> Iterator[bytes]:
        """Stream a tensor's bytes (or a slice) in chunks, never holding the whole tensor."""
        t = self.inventory[name]
        end = t.nbytes if length is None else start + length
        pos = start
        while pos < end:
            n = min(chunk_bytes, end - pos)
            yield self.read_bytes(name, pos, n)
            pos += n

    def read_numpy(self, name: str):
        """A tensor as a numpy array (integer, bool and IEEE float dtypes; BF16/F8 need :meth:`read_tensor`)."""

        t = self.inventory[name]
        return to_numpy(self.read_bytes(name), t.dtype, t.shape, name=name)

    def read_tensor(self, name: str):
        """A tensor as a torch.Tensor, read by range (no other tensor's bytes are fetched)."""

        t = self.inventory[name]
        return to_torch(self.read_bytes(name), t.dtype, t.shape, name=name)


def open_checkpoint(location: str | os.PathLike[str] | Location, *, endpoint: str | None = None, timeout: float | None = None,
                    token: str | bool | None = None, progress: bool | None = None) -> Checkpoint:
    """Open a checkpoint and read its inventory from headers alone (plus config.json when present)."""
    loc = location if isinstance(location, Location) else parse_location(location)
    source, loc = open_source(loc, endpoint=endpoint, timeout=timeout, token=token)
    try:
        if source.kind in PROBE_KINDS and (not loc.filename or loc.filename == CONFIG_NAME):
            files, weight_map, headers, config = _probe(source, progress=progress)
        else:
            files, weight_map = resolve_files(source, loc)
            headers, config = _headers_and_config(source, files, progress=progress)
        inventory = Inventory.from_headers(loc.raw, headers, config=config)
        if weight_map:
            _check_weight_map(inventory, weight_map, loc.raw)
    except BaseException:
        source.close()
        raise
    return Checkpoint(source, loc, inventory)


@contextmanager
def opened(location: str | os.PathLike[str] | Location | Checkpoint, *, endpoint: str | None = None, timeout: float | None = None,
           token: str | bool | None = None) -> Iterator[Checkpoint]:
    """A checkpoint for the duration of a ``with``: an already open one is used (and left open),
    anything else is opened and closed. Lets callers open a drafter once and hand it to several steps."""
    if isinstance(location, Checkpoint):
        yield location
        return
    with open_checkpoint(location, endpoint=endpoint, timeout=timeout, token=token) as ckpt:
        yield ckpt


def read_inventory(location: str | os.PathLike[str] | Location, *, endpoint: str | None = None, timeout: float | None = None,
                   token: str | bool | None = None, progress: bool | None = None) -> Inventory:
    """Every tensor's name, dtype and shape, from headers alone, wherever the checkpoint lives."""
    with open_checkpoint(location, endpoint=endpoint, timeout=timeout, token=token, progress=progress) as ckpt:
        return ckpt.inventory


def _probe(source: Source, *, progress: bool | None):
    """A remote folder (Hub repo, HTTP URL) in the fewest round trips: the header of model.safetensors
    and config.json at once (one round trip for a single-file checkpoint, a second only when the header
    outgrows the first window); when there is no model.safetensors, the index, then its shards in
    parallel; when there is no index either, the listing (Hub) as :func:`resolve_files` reads it.
    Never more requests than huggingface_hub's get_safetensors_metadata, which checks the single file
    with a HEAD first."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        config = pool.submit(read_config, source)
        try:
            single: FileHeader | None = read_header(source, SINGLE_NAME)
        except NotFoundError as e:
            single, missing = None, e
        if single is not None:
            return [SINGLE_NAME], None, [single], config.result()
        raw = source.read_small(INDEX_NAME)
        if raw is not None:
            files, weight_map = _shards_from_index(raw, f"{source.display}/{INDEX_NAME}")
            return files, weight_map, _read_headers(source, files, progress=progress), config.result()
        listing = source.list()
        if listing is None:
            raise missing
        files, weight_map = _from_listing(source, listing)
        return files, weight_map, _read_headers(source, files, progress=progress), config.result()


def _headers_and_config(source: Source, files: list[str], *, progress: bool | None):
    """Every header and config.json; for a remote source config.json travels beside the headers."""
    if source.kind == "local":
        return _read_headers(source, files, progress=progress), read_config(source)
    with ThreadPoolExecutor(max_workers=1) as pool:
        config = pool.submit(read_config, source)
        return _read_headers(source, files, progress=progress), config.result()


def _read_headers(source: Source, files: list[str], *, progress: bool | None) -> list[FileHeader]:
    if len(files) == 1:
        return [read_header(source, files[0])]
    from tqdm.auto import tqdm

    show = (len(files) > 8) if progress is None else progress
    with ThreadPoolExecutor(max_workers=min(MAX_WORKERS, len(files))) as pool:
        results = pool.map(lambda f: read_header(source, f), files)
        return list(tqdm(results, total=len(files), desc="headers", unit="file", disable=not show, leave=False))


def _check_weight_map(inventory: Inventory, weight_map: Mapping[str, str], where: str) -> None:
    for name, file in weight_map.items():
        if name not in inventory:
            raise HeaderError(f"{where}: the index maps {name!r} to {file}, but that shard has no such tensor.")
        if inventory[name].file != file:
            raise HeaderError(f"{where}: the index maps {name!r} to {file}, but it is in {inventory[name].file}.")


__all__ = ["Checkpoint", "open_checkpoint", "read_inventory", "read_header", "resolve_files", "read_config",
           "load_config", "opened"]


def load_config(location: str | os.PathLike[str] | Location, *, kind: str = "any", endpoint: str | None = None, timeout: float | None = None,
                token: str | bool | None = None, label: str | None = None) -> dict[str, Any]:
    """A config.json from a file path or any location (the config.json beside the weights).

    ``label`` names the location in the not-found message (default: the location itself)."""

    loc = location if isinstance(location, Location) else parse_location(location)
    source, loc = open_source(loc, endpoint=endpoint, timeout=timeout, token=token)
    with source:
        name = loc.filename if loc.filename and loc.filename.endswith(".json") \
            and not loc.filename.endswith(".index.json") else CONFIG_NAME
        raw = source.read_small(name)
        if raw is None:
            what = "the target model's config.json" if kind == "target" else "a config.json"
            raise NotFoundError(f"{label or repr(loc.raw)} has no {name}: give {what}, or a folder or repo "
                                "that holds it.")
        return load_config_bytes(raw, source=f"{loc.raw}" if loc.filename == name else f"{loc.raw}/{name}",
                                 kind=kind)
