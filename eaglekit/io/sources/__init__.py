"""Checkpoint locations that only fetch bytes: local, Hub, HTTP and SSH (see :mod:`eaglekit.sources.base`)."""
