"""Reading the files of a dump folder someone else wrote: every byte through the same guards.

A training pipeline's dump is a folder of thousands of files we did not write. Each one is read the
way a checkpoint shard is (:class:`~eaglekit.io.sources.local.LocalSource`): regular files only (a FIFO
or a device is refused before a byte is read, never waited on), links must resolve inside the folder,
and sizes are checked before reading: a sample file against :data:`MAX_SAMPLE_BYTES`, a gzip stream
against :func:`gzip_cap` while it inflates (streamed: refused the moment it passes), a sample's declared
positions against :data:`MAX_POSITIONS` and each tensor's declared elements against the bytes its
storage holds (:func:`~eaglekit.io.dumps.record.make_record`).

Pickle-based files (SpecForge ``.ckpt``, Model-Optimizer ``.pt``) are loaded with
``torch.load(weights_only=True)`` only, from torch's zip container only (its entries stored, not
compressed, their sizes summing to no more than the file): anything the restricted unpickler refuses
(a class, a function, a reduce call) is one line, and nothing in the file runs.
"""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from typing import Any

from eaglekit.core.errors import HeaderError, LocationError, NotFoundError
from eaglekit.core.redact import shown
from eaglekit.io.sources.local import LocalSource

#: Largest sample file (or inflated gzip stream) read: 8 GiB, about 64K positions of a 7168-wide target
#: with four captured layers in bf16.
MAX_SAMPLE_BYTES = 8 * 1024 ** 3
#: Most positions one sample may declare (real training samples hold up to a few hundred thousand).
MAX_POSITIONS = 1 << 20
#: Most files listed in one dump folder (a 37K-sample dump has 37K; 10M is a typo or a hostile tree).
MAX_FILES = 10_000_000
#: Deepest folder level walked (SpecForge nests one level: rows_*/).
MAX_DEPTH = 4


class DumpFolder:
    """A dump folder opened for guarded reads: files named relative to it, with "/" separators."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        folder = os.path.expanduser(os.fspath(path))
        if not os.path.isdir(folder):
            raise NotFoundError(f"{shown(folder)}: no such hidden-state dump folder.")
        self.path = folder
        self.source = LocalSource(folder)

    def walk(self, *, suffixes: tuple[str, ...]) -> list[str]:
        """Files under the folder whose names end with one of ``suffixes``, sorted as SpecForge and
        speculators sort them (by path); links to folders are not followed."""
        found: list[str] = []
        for top, dirs, files in os.walk(self.path, followlinks=False):
            rel = os.path.relpath(top, self.path)
            depth = 0 if rel == "." else rel.count(os.sep) + 1
            if depth >= MAX_DEPTH:
                dirs[:] = []
            dirs.sort()
            for f in files:
                if f.endswith(suffixes):
                    found.append(f if rel == "." else f"{rel}/{f}".replace(os.sep, "/"))
                    if len(found) > MAX_FILES:
                        raise HeaderError(f"{shown(self.path)} holds more than {MAX_FILES} dump files; "
                                          "point at one dump's folder.")
        return sorted(found, key=_natural)

    def names(self) -> list[str]:
        """Names directly in the folder (for recognising a layout)."""
        try:
            return sorted(os.listdir(self.path))
        except OSError as e:
            raise LocationError(f"{shown(self.path)}: cannot list the folder ({e.strerror}).") from e

    def size(self, name: str) -> int:
        return self.source.read(name, 0, 0).file_size

    def read(self, name: str, *, limit: int = MAX_SAMPLE_BYTES) -> bytes:
        """The whole file, refused before reading when larger than ``limit``."""
        size = self.size(name)
        if size > limit:
            raise HeaderError(f"{shown(self.where(name))} is {size} bytes, over the {limit}-byte limit for one "
                              "dump sample; refusing to read it.")
        return self.source.read(name, 0, size).data

    def read_small(self, name: str, limit: int) -> bytes | None:
        return self.source.read_small(name, limit)

    def where(self, name: str) -> str:
        return os.path.join(self.path, name)


def _natural(name: str) -> tuple:
    """data_10 after data_9: sort by the numbers in a name, as a person reads it."""
    import re

    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


#: A gzip'd sample may inflate to at most this many times its compressed size (hidden states in bf16 or
#: float32 compress by well under 2x; a stream that inflates a thousandfold is a bomb)...
MAX_GZIP_RATIO = 16
#: ...or to this floor, for small files (a short sample's token ids and masks compress well), and never past
#: :data:`MAX_SAMPLE_BYTES`.
GZIP_FLOOR = 64 << 20
#: Compressed bytes read, and inflated bytes produced, per step of the stream.
_GZIP_STEP = 1 << 20


def gzip_cap(compressed: int, limit: int = MAX_SAMPLE_BYTES) -> int:
    """The most bytes a gzip file of ``compressed`` bytes may inflate to."""
    return min(limit, max(GZIP_FLOOR, MAX_GZIP_RATIO * compressed))


def gunzip(folder: DumpFolder, name: str, *, limit: int = MAX_SAMPLE_BYTES) -> bytearray:
    """The inflated bytes of the gzip file ``name``: the one gzip reader of eaglekit. The compressed file is
    read and inflated a step at a time and refused the moment its output passes :func:`gzip_cap` (its size
    times :data:`MAX_GZIP_RATIO`, at most ``limit``), so a small bomb costs at most that much memory, never
    what it would inflate to."""
    where = folder.where(name)
    size = folder.size(name)
    if size > limit:
        raise HeaderError(f"{shown(where)} is {size} bytes, over the {limit}-byte limit for one dump sample; "
                          "refusing to read it.")
    cap = gzip_cap(size, limit)
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    offset = 0
    try:
        while offset < size:
            chunk = folder.source.read(name, offset, min(_GZIP_STEP, size - offset)).data
            if not chunk:
                break
            offset += len(chunk)
            while chunk:
                if d.eof:  # another gzip member follows (concatenated gzip files inflate to their concatenation)
                    if not chunk.strip(b"\0"):  # zero padding after the last member
                        break
                    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                out += d.decompress(chunk, _GZIP_STEP)
                chunk = d.unconsumed_tail if not d.eof else d.unused_data
                if len(out) > cap:
                    raise HeaderError(f"{shown(where)} inflates to more than {cap} bytes ({MAX_GZIP_RATIO} times "
                                      "its compressed size, or the floor): a gzip bomb, not a dump sample; refusing "
                                      "it.")
    except zlib.error as e:
        raise HeaderError(f"{shown(where)} is not a valid gzip file ({e}).") from e
    if not d.eof:
        raise HeaderError(f"{shown(where)} is not a valid gzip file (the stream ends early).")
    return out  # not bytes(out): that would hold the sample twice


def torch_load(data: bytes | bytearray, *, where: str, expected: str = "A dump sample is a dict of tensors") -> Any:
    """``torch.load(weights_only=True)`` of a torch zip file's bytes; one :class:`HeaderError` for
    anything else (a legacy pickle, a compressed or oversized entry, an object the restricted
    unpickler refuses: it is refused, never run)."""
    import pickle

    import torch  # heavy: only when a pickle-based dump is read

    buf = io.BytesIO(data)
    if not zipfile.is_zipfile(buf):
        raise HeaderError(f"{shown(where)} is not a torch.save zip file (a legacy or foreign pickle); eaglekit loads "
                          "only torch's zip format, with weights_only=True. Re-save it with a current torch.")
    try:
        with zipfile.ZipFile(buf) as z:
            entries = z.infolist()
    except (zipfile.BadZipFile, ValueError) as e:
        raise HeaderError(f"{shown(where)}: malformed torch zip file ({e}).") from e
    if any(e.compress_type != zipfile.ZIP_STORED for e in entries) or sum(e.file_size for e in entries) > len(data):
        raise HeaderError(f"{shown(where)}: its zip entries are compressed or declare more bytes than the file "
                          "holds; torch.save never writes that. Refusing it.")
    buf.seek(0)
    try:
        return torch.load(buf, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        first = str(e).strip().splitlines()
        reason = next((ln for ln in first if "Unsupported" in ln or "GLOBAL" in ln), first[0] if first else "")
        raise HeaderError(f"{shown(where)} holds Python objects that weights_only loading refuses "
                          f"({shown(reason[:200])}); it was not run. {expected}.") from e
    except Exception as e:  # torch raises RuntimeError, EOFError, ValueError, KeyError... on a broken file
        raise HeaderError(f"{shown(where)}: torch cannot load it ({type(e).__name__}: "
                          f"{shown(str(e).splitlines()[0][:200] if str(e) else '')}).") from e

