"""The live interval widened by the spread between sub-windows: drafts of one request are not independent.

A window's per-draft interval (:func:`eaglekit.core.serving.live.difference`, from vLLM's per-position counts)
treats every draft as independent; the drafts of one request are correlated (an easy request is easy
throughout), so it is too narrow. :func:`widen` takes the reading over the whole window and the readings over
its sub-windows (consecutive scrapes), bootstraps the pooled accept length over the sub-windows (1 + sum accepted /
sum drafts, each sub-window one unit, seeded), and keeps the wider of the two intervals, its method saying which
and both. The spread between sub-windows carries what the requests in them share; with fewer than
:data:`MIN_PARTS` sub-windows that held drafts it is not estimated and the reading says so. SGLang's counters
give no per-draft interval; the sub-windows give one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from eaglekit.core.serving.livereading import LiveReading
from eaglekit.core.uncertainty import Interval, bootstrap_ratio

__all__ = ["MIN_PARTS", "widen"]

#: Sub-windows with drafts needed before their spread is used.
MIN_PARTS = 3


def widen(reading: LiveReading, parts: Sequence[LiveReading | None], *, seed: int = 0) -> LiveReading:
    """``reading`` with its accept-length interval widened to the bootstrap over ``parts`` (the sub-windows' readings,
    None where one held no drafts) where that is wider."""
    used = [p for p in parts if p is not None and p.drafts and p.accepted_tokens is not None]
    own = reading.accept_length
    if len(used) < MIN_PARTS:
        note = (f"{len(used)} of {len(parts)} sub-windows held drafts: the spread between them is not estimated, so "
                "the interval treats drafts as independent (somewhat narrow)")
        return replace(reading, notes=(*reading.notes, note))
    b = bootstrap_ratio([float(p.accepted_tokens) for p in used], [float(p.drafts) for p in used],  # type: ignore[arg-type]
                        seed=seed, unit="sub-windows")
    spread = Interval(own.value, 1 + b.low if b.low is not None else None, 1 + b.high if b.high is not None else None,
                      b.method)
    if not spread.has_interval:
        return reading
    if own.has_interval and own.low <= spread.low and spread.high <= own.high:  # type: ignore[operator]
        method = f"{own.method}; wider than the {spread.method} of the window"
        return replace(reading, accept_length=Interval(own.value, own.low, own.high, method))
    low = spread.low if not own.has_interval else min(own.low, spread.low)  # type: ignore[type-var]
    high = spread.high if not own.has_interval else max(own.high, spread.high)  # type: ignore[type-var]
    method = (f"{spread.method} of the window (their spread carries the correlation of drafts within requests)"
              + (f", widening the {own.method.split(' (')[0]}" if own.has_interval else ""))
    return replace(reading, accept_length=Interval(own.value, low, high, method))
