"""The demo world: synthetic drafters and targets in real layout (:mod:`.world`, sized by
:mod:`.spec`; thin quantised targets and hidden-state dumps in :mod:`.targets`; a trained world where
accept lengths mean something in :mod:`.trained`), the search shelf of look-alike Hub repos (:mod:`.shelf`), and the loopback servers the
tests and notebooks read them through: a Hub-compatible server (:mod:`.hubserver`) on a plain
byte-range file server (:mod:`.fileserver`). May import :mod:`eaglekit.analysis`, :mod:`eaglekit.io`
and :mod:`eaglekit.core`; never the views or the CLI.

``from eaglekit.demo import build_demo`` (and the world's other names) still works: they load lazily
from :mod:`.world`.
"""

from __future__ import annotations

import importlib


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    world = importlib.import_module(f"{__name__}.world")
    try:
        return getattr(world, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
