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
import shutil
import struct
import tempfile
from pathlib import Path

from eaglekit.core.errors import InputError
from eaglekit.io.reader import Checkpoint, open_checkpoint

#: bytes fetched per range request while copying
SPOOL_CHUNK = 64 << 20
FILE = "model.safetensors"


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


def remove_spool(folder: str | os.PathLike[str] | None) -> None:
    """Delete a folder :func:`spool_tensor` made (nothing else: its name is checked first)."""
    if folder is None:
        return
    folder = Path(folder)
    if folder.name.startswith("eaglekit-spool-") and folder.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(folder, ignore_errors=True)
