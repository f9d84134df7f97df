"""A local folder: byte ranges with ``os.pread``, so reading a header never maps or loads the file."""

from __future__ import annotations

import os

from eaglekit.core.errors import LocationError, NotFoundError
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source


class LocalSource(Source):
    kind = "local"

    def __init__(self, folder: str, *, display: str | None = None) -> None:
        super().__init__(display or folder)
        self.folder = folder
        if not os.path.exists(folder):
            raise NotFoundError(f"{self.display}: no such file or folder.")

    def _path(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def read(self, name: str, start: int, length: int) -> Chunk:
        path = self._path(name)
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise NotFoundError(f"{path}: no such file.") from e
        except IsADirectoryError as e:
            raise LocationError(f"{path} is a folder, not a file.") from e
        except PermissionError as e:
            raise LocationError(f"{path}: permission denied.") from e
        try:
            size = os.fstat(fd).st_size
            length = max(0, min(length, size - start))
            parts = []
            while length > 0:  # pread may return short reads on some filesystems
                part = os.pread(fd, length, start)
                if not part:
                    break
                parts.append(part)
                start += len(part)
                length -= len(part)
            return Chunk(b"".join(parts), size)
        except IsADirectoryError as e:
            raise LocationError(f"{path} is a folder, not a file.") from e
        finally:
            os.close(fd)

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        path = self._path(name)
        if not os.path.isfile(path):
            return None
        if os.path.getsize(path) > limit:
            raise LocationError(f"{path} is larger than {limit} bytes; expected a small JSON file.")
        with open(path, "rb") as f:
            return f.read()

    def list(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.folder) if e.is_file())
        except NotADirectoryError as e:
            raise LocationError(f"{self.display} is neither a folder nor a safetensors file.") from e
        except OSError as e:
            raise LocationError(f"{self.display}: cannot list the folder ({e.strerror}).") from e
