"""What a ``torch.save`` file holds, told from its pickle's names without loading a tensor or running a byte.

Recognising a dump folder by file extension is not enough: speculators' ``prepare_data.py`` writes a
``token_freq.pt`` beside its samples, and Model-Optimizer names each sample ``{conversation_id}.pt``.
What tells the writers apart is the keys they save. A torch zip file keeps its pickle in one small
entry (``<name>/data.pkl``, the tensors' bytes in others); :func:`saved_names` reads only that entry by
range and lists the strings its opcodes carry (``pickletools.genops`` walks the opcodes, nothing is
unpickled), so a 200 MB sample costs a few kilobytes to recognise.
"""

from __future__ import annotations

import io
import pickletools
import struct
import zipfile

from eaglekit.io.dumps.files import DumpFolder

#: Largest pickle entry looked at: a dict of a few tensors pickles to well under a kilobyte.
MAX_PICKLE_BYTES = 1 << 20


class _Ranges(io.RawIOBase):
    """A seekable read-only file over a source's byte ranges (what :mod:`zipfile` needs)."""

    def __init__(self, folder: DumpFolder, name: str) -> None:
        self._folder, self._name = folder, name
        self._size = folder.size(name)
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer) -> int:
        n = max(0, min(len(buffer), self._size - self._pos))
        if n == 0:
            return 0
        data = self._folder.source.read(self._name, self._pos, n).data
        buffer[:len(data)] = data
        self._pos += len(data)
        return len(data)


def saved_names(folder: DumpFolder, name: str) -> frozenset[str] | None:
    """The strings in a torch zip file's pickle (its dict keys among them), or None when ``name`` is not a
    torch zip file whose pickle eaglekit can look at (a legacy pickle, a broken or oversized entry). A file
    the folder's guards refuse (a FIFO, a link out of the folder) raises as any read does."""
    try:
        with zipfile.ZipFile(io.BufferedReader(_Ranges(folder, name))) as z:
            entry = next((e for e in z.infolist() if e.filename.rsplit("/", 1)[-1] == "data.pkl"), None)
            if entry is None or entry.file_size > MAX_PICKLE_BYTES or entry.compress_type != zipfile.ZIP_STORED:
                return None
            data = z.read(entry)
        return frozenset(arg for _op, arg, _pos in pickletools.genops(data) if isinstance(arg, str))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, KeyError, NotImplementedError,
            struct.error):  # not a zip, a truncated one, a malformed pickle: it shows no writer's keys
        return None
