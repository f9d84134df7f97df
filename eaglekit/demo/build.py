"""Demo folders built once, whole, however many processes ask for them at the same time.

Every demo builder (the trained world, the token demo, the workspace, the Hub repos, the dumps, the
planted-drift targets) writes through :func:`built_once`: pytest workers, a notebook's kernel and a
terminal may all ask for the same folder at once. The folder is built in a temporary sibling
(``.<name>.building-*``, from :func:`tempfile.mkdtemp` in the same parent), its version stamp
(``.eaglekit-built.json``) is written last, and the sibling is renamed into place, all under an
exclusive ``fcntl.flock`` on ``.<name>.lock`` beside it. So a reader sees no folder, the old complete
folder or the new complete folder, never a half-built one. A build that crashed leaves only a temporary
sibling (swept by the next builder, which holds the lock, so no live build owns it, or by the next reader of
the complete folder when the lock is free) and a lock file the kernel already unlocked when its process died:
neither blocks the next build.

What is swept is only what eaglekit can prove it made: every temporary folder gets a marker file
(:data:`MARKER`, holding :data:`SIGNATURE` and the folder's final name) the moment it is created, and the
sweep removes a sibling only when that marker is there, a regular file, with that content. A user's own
``.<name>.old-notes`` or ``.<name>.building-draft`` beside the folder is never touched. A complete folder
moved aside for its replacement (``.<name>.old-*``) is put back when the process died before the new one
took its place, so what was complete before a build survives the build's death.

The lock file is opened with ``O_NOFOLLOW | O_NONBLOCK`` and must be a regular file: a link planted at its
name is refused, never followed, and a FIFO there is refused without blocking.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from eaglekit.core.errors import InputError

#: The stamp a complete build holds: ``{"version": ..., "build": <uuid>}``, written last.
STAMP = ".eaglekit-built.json"
#: The marker inside every temporary folder eaglekit creates beside a build (removed once the folder is in place).
MARKER = ".eaglekit-temporary"
#: The marker's first line; the second names the folder the temporary was made for.
SIGNATURE = "eaglekit temporary build folder: safe to delete once no eaglekit build runs"


def stamp_of(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The build stamp in ``path``, or None when it holds no complete build."""
    try:
        stamp = json.loads((Path(path) / STAMP).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


@contextlib.contextmanager
def build_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the exclusive lock of the folder ``path`` (``.<name>.lock`` beside it; the kernel releases it
    when the holder exits, however it exits). A lock path that is a link or not a regular file is refused."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _open_lock(path.parent / f".{path.name}.lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _open_lock(lock: Path) -> int:
    """The lock file's descriptor: created or opened without following a link and without blocking on a FIFO;
    anything but a regular file is one :class:`InputError`."""
    def refuse(why: str) -> InputError:
        return InputError(f"{lock} {why}; eaglekit uses it as a build lock and never follows or opens anything else "
                          "there: remove it and try again.")

    try:
        st = os.lstat(lock)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise refuse("is a symbolic link")
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise refuse("is not a regular file")
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(lock, flags, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise refuse("is a symbolic link") from None
        if e.errno == errno.ENXIO:
            raise refuse("is not a regular file") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):   # swapped in between the lstat and the open
        os.close(fd)
        raise refuse("is not a regular file")
    return fd


def built_once(path: str | os.PathLike[str], version: Any, build: Callable[[Path], object], *,
               ours: Callable[[Path], bool] | None = None, force: bool = False, what: str = "demo folder") -> Path:
    """``path`` holding a complete build of ``version`` (any JSON value), built by ``build(folder)`` unless
    a build of that version is already there; returns ``path``.

    ``build`` writes everything into the fresh folder it is given (the final path's temporary sibling).
    ``ours(path)``: whether an existing folder without a stamp is an older eaglekit build that may be
    replaced; any other non-empty folder is refused. ``force``: build again, unless another process
    finished a build while this one waited for the lock."""
    path = Path(path)
    if path.is_symlink():       # a link to a folder built elsewhere: build there, keep the link
        try:
            path = path.resolve(strict=True)
        except (OSError, RuntimeError):
            raise InputError(f"{path} is a symbolic link that leads nowhere (a missing target or a loop); give a "
                             f"real folder for the {what}.") from None
        if not path.is_dir():
            raise InputError(f"{path} is a file; give a folder for the {what}.")
    seen = stamp_of(path)
    if seen is not None and seen.get("version") == version and not force:
        sweep_if_idle(path)   # a killed build's leftovers go even when nothing needs building
        return path
    _refuse_foreign(path, seen, ours, what)   # before the lock too: a refused folder leaves nothing beside it
    with build_lock(path):
        sweep(path)                            # a complete folder a killed build moved aside comes back first
        now = stamp_of(path)
        if now is not None and now.get("version") == version and (not force or now != seen):
            return path
        _refuse_foreign(path, now, ours, what)
        built_beside(path, build, stamp={"version": version, "build": uuid.uuid4().hex})
    return path


def _refuse_foreign(path: Path, stamp: dict[str, Any] | None, ours: Callable[[Path], bool] | None, what: str) -> None:
    """Refuse a file, or a non-empty folder that no eaglekit build wrote (eaglekit replaces only its own)."""
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} is a file; give a folder for the {what}.")
    if stamp is None and path.is_dir() and any(path.iterdir()) and not (ours and ours(path)):
        raise InputError(f"{path} exists and is not an eaglekit {what}; choose an empty or new folder "
                         "(eaglekit never deletes a folder it did not write).")


def built_beside(path: Path, build: Callable[[Path], object], *, stamp: dict[str, Any] | None = None) -> None:
    """Build ``path`` in a temporary sibling and rename it into place, replacing what was there. The caller
    holds :func:`build_lock` of ``path``: leftovers of crashed builds beside it are swept first (only those
    holding eaglekit's :data:`MARKER`)."""
    sweep(path)
    tmp = _temporary(path, "building")
    os.chmod(tmp, 0o777 & ~_umask())    # mkdtemp's 0700 would make the final folder private
    try:
        build(tmp)
        if stamp is not None:
            (tmp / STAMP).write_text(json.dumps(stamp) + "\n")   # last: a folder with a stamp is complete
        if path.is_dir() and not path.is_symlink():
            old = _temporary(path, "old")
            os.rename(path, old / path.name)   # killed here: the next sweep puts old/<name> back
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if path.is_symlink() or path.exists():
                path.unlink()
            os.rename(tmp, path)
        (path / MARKER).unlink(missing_ok=True)   # the marker went with the rename: a leftover is marked until here
    finally:
        shutil.rmtree(tmp, ignore_errors=True)   # our own mkdtemp folder, gone already when renamed into place


def _temporary(path: Path, kind: str) -> Path:
    """A new folder ``.<name>.<kind>-XXXX`` beside ``path`` (mkdtemp: created, never reused), marked as eaglekit's."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.{kind}-", dir=path.parent))
    fd = os.open(tmp / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(f"{SIGNATURE}\n{path.name}\n")
    return tmp


def _ours(folder: Path, name: str) -> bool:
    """Whether ``folder`` is a temporary folder eaglekit made for ``name``: a real folder (not a link) holding a
    regular :data:`MARKER` file with :data:`SIGNATURE` and ``name``."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return False
        fd = os.open(folder / MARKER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    return data == f"{SIGNATURE}\n{name}\n".encode()


def sweep(path: str | os.PathLike[str]) -> None:
    """Remove the temporary folders crashed builds of ``path`` left beside it, proven eaglekit's by their
    :data:`MARKER`; a complete folder moved aside (``.<name>.old-*``) is renamed back when ``path`` is gone.
    Call it holding :func:`build_lock` of ``path``."""
    path = Path(path)
    try:
        names = sorted(os.listdir(path.parent))
    except OSError:
        return
    for kind in ("old", "building"):
        prefix = f".{path.name}.{kind}-"
        for n in names:
            folder = path.parent / n
            if not n.startswith(prefix) or not _ours(folder, path.name):
                continue
            kept = folder / path.name
            if kind == "old" and not os.path.lexists(path) and kept.is_dir() and not kept.is_symlink():
                os.rename(kept, path)
            shutil.rmtree(folder, ignore_errors=True)
    if _ours(path, path.name):   # killed between the final rename and the marker's removal: the build is whole
        (path / MARKER).unlink()


def sweep_if_idle(path: str | os.PathLike[str]) -> bool:
    """:func:`sweep` ``path``'s leftovers when no build of it runs: its lock is taken without waiting, so a live
    build (which holds the lock while its temporary folder fills) keeps its folder. Nothing is opened or created
    when no leftover is there. True when it swept."""
    path = Path(path)
    try:
        names = os.listdir(path.parent)
    except OSError:
        return False
    if not any(n.startswith((f".{path.name}.building-", f".{path.name}.old-")) for n in names):
        return False
    fd = _open_lock(path.parent / f".{path.name}.lock")
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:   # a build is running: its folder is in use
            return False
        try:
            sweep(path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return True


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
