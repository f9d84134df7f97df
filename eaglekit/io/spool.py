"""A remote tensor copied once to a private local file, so that a pass that reads it again and again (a target's
``lm_head`` streamed in row blocks for every sample) reads the page cache, not the network.

The copy goes to a fresh folder of its own under the system's temporary folder (``mkdtemp``: mode 0700), never
into a user's model folder, written through a descriptor opened with ``O_EXCL | O_NOFOLLOW``, in chunks (one
chunk in memory at a time). It is a one-tensor safetensors file, read back with the kit's own reader;
:func:`remove_spool` deletes it (the caller's ``close``).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import struct
import tempfile
from pathlib import Path

from eaglekit.core.errors import InputError
from eaglekit.io.reader import Checkpoint, open_checkpoint

#: bytes fetched per range request while copying
SPOOL_CHUNK = 64 << 20
FILE = "model.safetensors"
#: the marker file inside a spool folder: the random token :func:`spool_tensor` wrote, proof that it made the folder
MARKER = ".eaglekit-spool"


def spool_tensor(ckpt: Checkpoint, name: str, *, progress: bool | None = None) -> tuple[Path, Checkpoint]:
    """Copy ``name`` from ``ckpt`` (any location) to a private local file; its folder and the local checkpoint
    opened on it (the caller closes it, then :func:`remove_spool` the folder)."""
    from tqdm.auto import tqdm

    info = ckpt.inventory[name]
    header = json.dumps({name: {"dtype": info.dtype, "shape": [int(d) for d in info.shape],
                                "data_offsets": [0, int(info.nbytes)]}}, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    folder = Path(tempfile.mkdtemp(prefix="eaglekit-spool-"))
    try:
        _write_new(folder / MARKER, secrets.token_hex(16).encode())
        try:
            fd = os.open(folder / FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        except OSError as e:
            raise InputError(f"Cannot write a local copy of {name} under {folder}: {e.strerror}. Free space in the "
                             "temporary folder (TMPDIR) or give the target as a local folder.") from e
        with os.fdopen(fd, "wb") as out, tqdm(total=int(info.nbytes), unit="B", unit_scale=True,
                                              desc=f"copying {name} once", disable=progress is False,
                                              leave=False) as bar:
            out.write(struct.pack("<Q", len(header)) + header)
            for chunk in ckpt.iter_bytes(name, chunk_bytes=SPOOL_CHUNK):
                try:
                    out.write(chunk)
                except OSError as e:
                    raise InputError(f"Cannot write a local copy of {name} under {folder}: {e.strerror}. Free "
                                     f"{int(info.nbytes) >> 20} MiB in the temporary folder (TMPDIR), or give the "
                                     "target as a local folder.") from e
                bar.update(len(chunk))
        return folder, open_checkpoint(folder)
    except BaseException:
        remove_spool(folder)
        raise


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _marker(folder: Path) -> bytes | None:
    """The marker's token, read without following a link (None: no marker, or not a plain file)."""
    try:
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(64)


def remove_spool(folder: str | os.PathLike[str] | None) -> None:
    """Delete a folder :func:`spool_tensor` made, proven by its marker: only the two files it wrote (never through
    a link), then the folder; a folder without the marker is left alone."""
    if folder is None:
        return
    folder = Path(folder)
    if _marker(folder) is None:
        return
    for name in (FILE, MARKER):
        try:
            if not stat.S_ISDIR(os.lstat(folder / name).st_mode):
                os.unlink(folder / name)   # unlink removes a link itself, never its target
        except OSError:
            pass
    try:
        os.rmdir(folder)
    except OSError:
        pass   # something else was put there: left, with it
