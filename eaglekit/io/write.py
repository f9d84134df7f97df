"""The one way eaglekit writes an output file: a fresh temporary file beside it, then a rename.

Every file a command writes (``vocab-coverage --out``, ``--html`` pages, a dump's samples and manifest,
a report's pages) goes through :func:`write_atomic`:

- the bytes go to a new file created with ``O_CREAT | O_EXCL`` (``tempfile.mkstemp``: a random name, mode
  0600, in the destination's own folder), so a link or a file planted at a predictable name is never
  followed or reused;
- a destination that is a symbolic link is refused (the rename would replace the link, but a user who
  pointed ``--out`` at a link most likely meant its target: say so instead);
- the file is flushed and fsync'd, given the permissions a new file gets (0666 less the umask) and
  renamed into place with ``os.replace`` (atomic within a folder): a reader sees the old file or the
  whole new one, never a part;
- on any failure the temporary file is removed and the error is one :class:`InputError` line.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown

Writer = Callable[[BinaryIO], object]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: str | os.PathLike[str], data: bytes | str | Writer, *, exist_ok: bool = True,
                 what: str = "the output") -> Path:
    """Write ``data`` (bytes, text as UTF-8, or a callable that writes to a binary file object) to
    ``path`` through a fresh temporary file in the same folder, then rename it into place.

    ``exist_ok=False`` refuses an existing destination (a new file only). A destination that is a symbolic
    link, or a folder, is always refused. Returns the path written."""
    out = Path(os.path.expanduser(os.fspath(path)))
    if out.is_symlink():
        raise InputError(f"{shown(out)} is a symbolic link; eaglekit does not write through links: give "
                         f"the real path for {what}.")
    if out.is_dir():
        raise InputError(f"{shown(out)} is a folder; give a file name for {what}.")
    if not exist_ok and out.exists():
        raise InputError(f"{shown(out)} exists; eaglekit writes {what} only to a new file.")
    folder = out.parent if str(out.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".eaglekit-partial", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write {shown(out)}: {e.strerror or e}; choose a writable folder for {what}.") from e
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, str):
                f.write(data.encode("utf-8"))
            elif isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                data(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        if out.is_symlink():  # planted while we wrote: refuse rather than replace someone's link
            raise InputError(f"{shown(out)} became a symbolic link while eaglekit wrote it; nothing was written.")
        if not exist_ok and out.exists():
            raise InputError(f"{shown(out)} appeared while eaglekit wrote it; nothing was written.")
        os.replace(tmp, out)
    except OSError as e:
        _remove(tmp)
        raise InputError(f"cannot write {shown(out)}: {e.strerror or e}; choose a writable path for {what}.") from e
    except BaseException:
        _remove(tmp)
        raise
    return out


def _remove(tmp: str) -> None:
    try:
        os.unlink(tmp)
    except OSError:
        pass


__all__ = ["write_atomic"]
