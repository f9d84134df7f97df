"""Demo folders built once, whole, however many processes ask for them at the same time.

Every demo builder (the trained world, the token demo, the workspace, the Hub repos, the dumps, the
planted-drift targets) writes through :func:`built_once`: pytest workers, a notebook's kernel and a
terminal may all ask for the same folder at once. The folder is built in a temporary sibling
(``.<name>.building-*``, from :func:`tempfile.mkdtemp` in the same parent), its version stamp
(``.eaglekit-built.json``) is written last, and the sibling is renamed into place, all under an
exclusive ``fcntl.flock`` on ``.<name>.lock`` beside it. So a reader sees no folder, the old complete
folder or the new complete folder, never a half-built one. A build that crashed leaves only a temporary
sibling (swept by the next builder, which holds the lock, so no live build owns it) and a lock file the
kernel already unlocked when its process died: neither blocks the next build.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from eaglekit.core.errors import InputError

#: The stamp a complete build holds: ``{"version": ..., "build": <uuid>}``, written last.
STAMP = ".eaglekit-built.json"


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
    when the holder exits, however it exits)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


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
        path = path.resolve()
    seen = stamp_of(path)
    if seen is not None and seen.get("version") == version and not force:
        return path
    _refuse_foreign(path, seen, ours, what)   # before the lock too: a refused folder leaves nothing beside it
    with build_lock(path):
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
    holds :func:`build_lock` of ``path``: leftovers of crashed builds beside it are swept first."""
    parent = path.parent
    for old in parent.glob(f".{path.name}.building-*"):
        shutil.rmtree(old, ignore_errors=True)
    for old in parent.glob(f".{path.name}.old-*"):
        shutil.rmtree(old, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.building-", dir=parent))
    os.chmod(tmp, 0o777 & ~_umask())    # mkdtemp's 0700 would make the final folder private
    try:
        build(tmp)
        if stamp is not None:
            (tmp / STAMP).write_text(json.dumps(stamp) + "\n")   # last: a folder with a stamp is complete
        if path.is_dir() and not path.is_symlink():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=parent))
            os.rename(path, old / path.name)
            os.rename(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            if path.is_symlink() or path.exists():
                path.unlink()
            os.rename(tmp, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
