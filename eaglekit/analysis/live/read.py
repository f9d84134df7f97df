"""Reading an engine's acceptance live: two scrapes of its ``/metrics`` over a window, or its log's lines.

A counter that went down between the scrapes means the server restarted: the reading says so and reads a new
window from the restarted server (up to :data:`RESTARTS` times). Everything about the scrapes themselves (the
deadline, the body cap, the redirects) is :class:`eaglekit.io.metrics.MetricsClient`; the arithmetic is
:func:`eaglekit.core.serving.live.difference`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace

from eaglekit.core.errors import InputError
from eaglekit.core.serving.live import CounterReset, LiveReading, difference, parse_metrics, parse_sglang_log
from eaglekit.io.metrics import MetricsClient, read_log

__all__ = ["RESTARTS", "read_live", "read_live_log"]

#: Restarts seen before giving up (each costs one more window).
RESTARTS = 2
#: Longest window accepted (a day): counters are read twice, nothing in between.
MAX_WINDOW_S = 86_400.0


def read_live(url: str, *, window: float = 10.0, model: str | None = None, timeout: float | None = None,
              token: str | None = None, sleep: Callable[[float], None] = time.sleep) -> LiveReading:
    """The engine's acceptance over ``window`` seconds: a scrape of ``url`` (``http://host:port`` or its
    ``/metrics``), a wait, a second scrape, and their difference (:class:`~eaglekit.core.serving.live.LiveReading`).
    ``model``: only that ``model_name``'s counters (default: every model's, summed). ``timeout``: seconds each
    scrape may take in all. ``token``: sent as a bearer token to that host only."""
    if not (isinstance(window, (int, float)) and 0 < window <= MAX_WINDOW_S):
        raise InputError(f"--window must be a number of seconds in (0, {MAX_WINDOW_S:g}], got {window!r}.")
    notes: list[str] = []
    with MetricsClient(url, timeout=timeout, token=token) as client:
        before = parse_metrics(client.scrape(), model=model, what=client.shown)
        start = time.monotonic()
        for attempt in range(RESTARTS + 1):
            sleep(window)
            after = parse_metrics(client.scrape(), model=model, what=client.shown)
            end = time.monotonic()
            try:
                reading = difference(before, after, max(end - start, 1e-9), source=client.shown)
            except CounterReset as e:
                if attempt == RESTARTS:
                    raise CounterReset(f"{client.shown}: {e} It restarted {RESTARTS + 1} times in a row; read it "
                                       "once it stays up.") from e
                notes.append(f"{e} A new window was read from the restarted server.")
                before, start = after, end
                continue
            return replace(reading, notes=(*notes, *reading.notes))
    raise AssertionError("unreachable")  # the loop returns or raises


def read_live_log(path: str | os.PathLike[str], *, steps: int | None = None, seed: int = 0) -> LiveReading:
    """The accept length of an SGLang server log's "Decode batch ... accept len" lines (see
    :func:`eaglekit.core.serving.live.parse_sglang_log`); ``steps``: the served draft steps, if known."""
    text, cut = read_log(path)
    reading = parse_sglang_log(text, source=os.fspath(path), steps=steps, seed=seed)
    if cut:
        reading = replace(reading, notes=(*reading.notes, "the log is larger than the read limit: its last part "
                                                          "was read"))
    return reading
