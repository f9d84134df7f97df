"""The one thing every checkpoint location does: hand back byte ranges of the files in a folder.

A :class:`Source` knows nothing about safetensors. It reads ``length`` bytes at ``start`` of a file
named relative to its folder, and says how long the whole file is. Header parsing, shard resolution and
tensor streaming live above it (``eaglekit.io.reader``), shared by the local, Hub, HTTP and SSH readers.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

# A name relative to the source's folder, with "/" separators ("model-00001-of-00002.safetensors").
FILENAME_T = str

#: Small files (config.json, model.safetensors.index.json) are read whole up to this size.
SMALL_FILE_LIMIT = 16 * 1024 * 1024


@dataclass(frozen=True)
class Chunk:
    """Bytes read from a file, and the file's total size (so one request also tells the size)."""

    data: bytes
    file_size: int


class Source(ABC):
    """A folder of files, readable by byte range. Subclasses only fetch bytes."""

    kind: ClassVar[str]

    def __init__(self, display: str) -> None:
        #: How the location is shown to users: never carries a token or password.
        self.display = display

    @abstractmethod
    def read(self, name: FILENAME_T, start: int, length: int) -> Chunk:
        """Read up to ``length`` bytes at ``start`` (fewer only at the end of the file).

        Raises NotFoundError when the file does not exist, and another LocationError subclass when it
        cannot be read; never returns more than asked (a server that ignores Range is refused). Only
        regular files inside the folder are read (links resolving elsewhere are refused), and a remote
        read finishes within its deadline (``EAGLEKIT_TIMEOUT``, see ``eaglekit.io.sources.http``).
        """

    def read_into(self, name: FILENAME_T, start: int, buffer: bytearray | memoryview) -> int:
        """Read up to ``len(buffer)`` bytes at ``start`` into ``buffer``; returns how many (fewer only at
        the end of the file). Remote sources write the answer in place, allocating nothing per call."""
        data = self.read(name, start, len(buffer)).data
        memoryview(buffer)[:len(data)] = data
        return len(data)

    @abstractmethod
    def read_small(self, name: FILENAME_T, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        """The whole of a small file, or None when it does not exist."""

    def list(self) -> list[FILENAME_T] | None:
        """Names of the files directly in the folder, or None where the protocol cannot list (HTTP)."""
        return None

    def close(self) -> None:
        """Release connections; the default holds none."""

    def __enter__(self) -> Source:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.display!r})"
