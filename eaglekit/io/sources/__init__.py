"""Checkpoint locations that only fetch bytes: local, Hub, HTTP and SSH (see :mod:`.base`).

:func:`open_source` is the one place a parsed :class:`~eaglekit.io.location.Location` becomes a source.
"""

from __future__ import annotations

import os

from eaglekit.core.errors import NotFoundError
from eaglekit.io.location import Location, hub_hint, parse_location
from eaglekit.io.sources.http import HttpSource
from eaglekit.io.sources.hub import HubSource
from eaglekit.io.sources.local import LocalSource


def open_source(location: str | os.PathLike[str] | Location, *, endpoint: str | None = None,
                timeout: float | None = None, token: str | bool | None = None):
    """Open the :class:`~eaglekit.io.sources.base.Source` for a location; returns ``(source, parsed)``.

    ``endpoint`` and ``token`` apply to ``hf://`` locations (defaults: HF_ENDPOINT, HF_TOKEN); ``timeout``
    is the total seconds each HTTP or Hub request may take (default: ``EAGLEKIT_TIMEOUT`` or 60).
    """
    loc = location if isinstance(location, Location) else parse_location(location)
    if loc.kind == "local":
        try:
            return LocalSource(loc.folder, display=loc.raw, named=loc.filename), loc
        except NotFoundError as e:
            hint = hub_hint(loc.raw)
            if hint:
                raise NotFoundError(f"{e} {hint}") from e
            raise
    if loc.kind == "hub":
        return HubSource(loc.repo_id, loc.folder, revision=loc.revision, endpoint=endpoint, timeout=timeout,
                         token=token, display=loc.raw), loc
    if loc.kind == "http":
        return HttpSource(loc.folder, display=loc.raw, query={loc.filename: loc.query} if loc.query else None,
                          timeout=timeout), loc

    from eaglekit.io.sources.ssh import SshSource  # paramiko and cryptography load only for ssh:// reads

    return SshSource(loc.host, loc.folder, user=loc.user, port=loc.port, display=loc.raw), loc
