"""A local folder: byte ranges with ``os.pread``, so reading a header never maps or loads the file.

Only regular files are read: a FIFO or a device named as a shard would block ``open`` forever or never
end, so each is refused before it is read (opened non-blocking, checked with ``fstat``). A file in the
folder that is a symbolic link must resolve inside the folder, or into the ``blobs/`` of a Hugging Face
cache repo when the folder is one of its ``snapshots/`` (whose files are all such links); a checkpoint
someone else packed cannot make eaglekit read ``/etc/passwd``. The file the location names itself is
the user's choice and may link anywhere.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path

from eaglekit.core.errors import LocationError, NotFoundError, TooLargeError
from eaglekit.core.redact import shown
from eaglekit.io.sources.base import SMALL_FILE_LIMIT, Chunk, Source


def allowed_roots(folder: str) -> tuple[str, ...]:
    """Real folders a file of ``folder`` may resolve into: the folder itself, and the repo's ``blobs/``
    when the folder is inside a Hugging Face cache snapshot (``models--O--R/snapshots/REV/...``)."""
    real = os.path.realpath(folder)
    roots = [real]
    parts = real.split(os.sep)
    if "snapshots" in parts:
        i = len(parts) - 1 - parts[::-1].index("snapshots")
        if i + 1 < len(parts):
            roots.append(os.sep.join(parts[:i] + ["blobs"]))
    return tuple(roots)


def inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class LocalSource(Source):
    kind = "local"

    def __init__(self, folder: str, *, display: str | None = None, named: str | None = None) -> None:
        """``named``: the file the location names (followed wherever it links)."""
        super().__init__(display or folder)
        self.folder = folder
        self.named = named
        if not os.path.exists(folder):
            raise NotFoundError(f"{self.display}: no such file or folder.")
        self._roots = allowed_roots(folder)

    def _path(self, name: str) -> str:
        path = os.path.join(self.folder, name)
        if name != self.named and not inside(os.path.realpath(path), self._roots):
            raise LocationError(f"{shown(path)} is a symbolic link to a file outside the checkpoint folder; "
                                "refusing to follow it. Copy the file into the folder if it belongs there.")
        return path

    def _open(self, path: str) -> tuple[int, int]:
        """(descriptor, size) of a regular file; anything else is refused before a byte is read."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError as e:
            raise NotFoundError(f"{shown(path)}: no such file.") from e
        except IsADirectoryError as e:
            raise LocationError(f"{shown(path)} is a folder, not a file.") from e
        except PermissionError as e:
            raise LocationError(f"{shown(path)}: permission denied.") from e
        except OSError as e:
            raise LocationError(f"{shown(path)}: cannot open it ({e.strerror}).") from e
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else \
                "a device or socket"
            raise LocationError(f"{shown(path)} is {kind}, not a regular file; refusing to read it.")
        return fd, st.st_size

    def read(self, name: str, start: int, length: int) -> Chunk:
        fd, size = self._open(self._path(name))
        try:
            return Chunk(_pread(fd, start, max(0, min(length, size - start))), size)
        finally:
            os.close(fd)

    def read_into(self, name: str, start: int, buffer: bytearray | memoryview) -> int:
        """As :meth:`read`, straight into ``buffer`` (``preadv``: no bytes object, no copy; a drafter's weights
        read by range for every pass come this way)."""
        if not hasattr(os, "preadv"):
            return super().read_into(name, start, buffer)
        view = memoryview(buffer).cast("B")
        fd, size = self._open(self._path(name))
        try:
            want, got = max(0, min(len(view), size - start)), 0
            while got < want:  # preadv may return short reads, and reads at most ~2 GiB a call
                n = os.preadv(fd, [view[got:want]], start + got)
                if not n:
                    break
                got += n
            return got
        finally:
            os.close(fd)

    def map(self, name: str) -> mmap.mmap:
        """The whole file memory-mapped read-only, for streaming compute over it (no copy through
        ``read()``); checked as :meth:`read` checks it. Close the map when done."""
        fd, size = self._open(self._path(name))
        try:
            if size == 0:
                raise LocationError(f"{shown(self._path(name))} is empty.")
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        if hasattr(mm, "madvise"):
            mm.madvise(mmap.MADV_SEQUENTIAL)  # read ahead, drop behind: tensors are streamed once
        return mm

    def read_small(self, name: str, limit: int = SMALL_FILE_LIMIT) -> bytes | None:
        path = self._path(name)
        if not os.path.exists(path):
            return None
        fd, size = self._open(path)
        try:
            if size > limit:
                raise TooLargeError(f"{shown(path)} is larger than {limit} bytes; expected a small JSON file.")
            return _pread(fd, 0, size)
        finally:
            os.close(fd)

    def list(self) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.folder) if e.is_file())
        except NotADirectoryError as e:
            raise LocationError(f"{self.display} is neither a folder nor a safetensors file.") from e
        except OSError as e:
            raise LocationError(f"{self.display}: cannot list the folder ({e.strerror}).") from e


def _pread(fd: int, start: int, length: int) -> bytes:
    parts = []
    while length > 0:  # pread may return short reads on some filesystems
        part = os.pread(fd, length, start)
        if not part:
            break
        parts.append(part)
        start += len(part)
        length -= len(part)
    return b"".join(parts)


#: How long a pipe given as a small input may take to send all of it (``<(printf ...)`` takes milliseconds).
PIPE_WAIT_S = 60.0


def read_local_file(path: str | os.PathLike[str], *, limit: int, what: str, pipe_wait: float = PIPE_WAIT_S) -> bytes:
    """The whole of a small local file given by the user (a table, a log, a map), read as checkpoint files
    are: a regular file, its size checked against ``limit`` first; or a shell's pipe (process substitution
    ``<(printf ...)``, a redirected stdin), read up to ``limit`` bytes within ``pipe_wait`` seconds. A named pipe
    (a FIFO on the file system: nothing says a writer will ever come), a device (``/dev/zero``) or a socket is
    refused unopened."""
    p = Path(path).expanduser()
    try:
        fifo = stat.S_ISFIFO(os.stat(p).st_mode)
    except OSError:
        fifo = False
    if fifo and not _shell_pipe(p):
        raise LocationError(f"{what} {shown(str(p))} is a named pipe (FIFO), not a regular file: it would wait for "
                            "a writer that may never come. Give a file, or a command's output as <(command).")
    if fifo:
        return _read_pipe(p, limit=limit, what=what, wait=pipe_wait)
    data = LocalSource(str(p.parent), display=str(p), named=p.name).read_small(p.name, limit) \
        if p.parent.is_dir() else None
    if data is None:
        raise NotFoundError(f"{what} {shown(str(p))}: no such file.")
    return data


def _shell_pipe(path: Path) -> bool:
    """True for a pipe without a name on the file system, as a shell passes ``<(command)`` or a redirected stdin
    (``/dev/fd/63`` resolves to ``/proc/PID/fd/pipe:[INODE]`` on Linux): its writer is the shell's command."""
    real = Path(os.path.realpath(path))
    return real.name.startswith("pipe:[") and real.parts[:2] == ("/", "proc")


def _read_pipe(path: Path, *, limit: int, what: str, wait: float) -> bytes:
    """A pipe's bytes until its writer closes it: at most ``limit`` bytes (one more is an error, so an endless
    writer is cut there) and ``wait`` seconds (a writer that never writes or never closes is cut then)."""
    import select
    import time

    try:  # non-blocking: opening a FIFO nobody writes to yet returns at once, and poll waits for the writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise LocationError(f"{what} {shown(str(path))}: cannot open the pipe ({e.strerror}).") from e
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise LocationError(f"{what} {shown(str(path))} changed while being opened; give a file or a pipe.")
        poll = select.poll()
        poll.register(fd, select.POLLIN)
        deadline, parts, size = time.monotonic() + wait, [], 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LocationError(f"{what} {shown(str(path))}: the pipe sent {size:,} bytes and did not end "
                                    f"within {wait:g} s; give a file, or a command that ends.")
            if not poll.poll(max(1, int(left * 1000))):
                continue
            try:
                part = os.read(fd, min(1 << 16, limit + 1 - size))
            except BlockingIOError:
                continue
            if not part:     # the writer closed its end: that is the whole input
                return b"".join(parts)
            parts.append(part)
            size += len(part)
            if size > limit:
                raise TooLargeError(f"{what} {shown(str(path))}: the pipe sent more than {limit:,} bytes, more "
                                    "than a small input holds; refusing the rest.")
    finally:
        os.close(fd)
