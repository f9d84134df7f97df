"""Hidden-state dumps on disk: the readers of every format eaglekit measures from.

:mod:`.native` is eaglekit's own format (written by ``eaglekit dump-hidden``).
"""
