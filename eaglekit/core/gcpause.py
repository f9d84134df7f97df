"""Pause Python's cyclic garbage collector while building many acyclic objects.

Parsing a header of 100,000 tensors allocates about a million containers (the JSON dicts and lists,
then one record per tensor). Each 700 allocations trigger a young-generation collection and every few
of those a full one that walks everything built so far: more than half the parse time goes to a
collector that can free nothing (none of these objects form cycles). Reference counting still frees
them as usual; only the cycle search waits until the outermost pause ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # pauses in progress, over all threads
_was_enabled = False


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector for the block; re-enabled (if it was on) when the last pause ends,
    so nested and concurrent pauses (shard headers parsed in threads) compose."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
