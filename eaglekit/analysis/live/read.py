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
from dataclasses import dataclass, replace
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, text_table
from eaglekit.core.serving.live import CounterReset, LiveReading, difference, parse_metrics, parse_sglang_log
from eaglekit.core.serving.livespread import widen
from eaglekit.io.metrics import MetricsClient, read_log

__all__ = ["RESTARTS", "SPLITS", "LiveSeries", "read_live", "read_live_log", "read_live_series"]

#: Restarts seen before giving up (each costs one more window).
RESTARTS = 2
#: Sub-windows a window is scraped in: their spread widens the interval (:mod:`eaglekit.core.serving.livespread`).
SPLITS = 5
#: Longest window accepted (a day): counters are read twice, nothing in between.
MAX_WINDOW_S = 86_400.0


def read_live(url: str, *, window: float = 10.0, model: str | None = None, timeout: float | None = None,
              token: str | None = None, name: str | None = None, splits: int = SPLITS, seed: int = 0,
              sleep: Callable[[float], None] = time.sleep) -> LiveReading:
    """The engine's acceptance over ``window`` seconds: ``splits + 1`` scrapes of ``url`` (``http://host:port`` or
    its ``/metrics``) ``window / splits`` apart, the difference of the first and the last
    (:class:`~eaglekit.core.serving.live.LiveReading`), its interval widened by the spread between the sub-windows
    (:func:`~eaglekit.core.serving.livespread.widen`, bootstrap seeded by ``seed``). ``model``: only that
    ``model_name``'s counters (default: every model's, summed). ``timeout``: seconds each scrape may take in all.
    ``token``: sent as a bearer token to that host only. ``name``: what the reading calls the server (default: its
    address, without credentials)."""
    if not (isinstance(window, (int, float)) and 0 < window <= MAX_WINDOW_S):
        raise InputError(f"--window must be a number of seconds in (0, {MAX_WINDOW_S:g}], got {window!r}.")
    if not (isinstance(splits, int) and 1 <= splits <= 100):
        raise InputError(f"splits must be a whole number from 1 to 100, got {splits!r}.")
    notes: list[str] = []
    with MetricsClient(url, timeout=timeout, token=token) as client:
        source = name or client.shown
        for attempt in range(RESTARTS + 1):
            snaps = [(parse_metrics(client.scrape(), model=model, what=client.shown), time.monotonic())]
            for _ in range(splits):
                sleep(window / splits)
                snaps.append((parse_metrics(client.scrape(), model=model, what=client.shown), time.monotonic()))
            try:
                reading = difference(snaps[0][0], snaps[-1][0], max(snaps[-1][1] - snaps[0][1], 1e-9), source=source)
                parts = [_part(a, b, source) for a, b in zip(snaps, snaps[1:])]
            except CounterReset as e:
                if attempt == RESTARTS:
                    raise CounterReset(f"{client.shown}: {e} It changed {RESTARTS + 1} times in a row; read it "
                                       "once it stays up.") from e
                notes.append(f"{e} A new window was read.")
                continue
            reading = widen(reading, parts, seed=seed)
            return replace(reading, notes=(*notes, *reading.notes))
    raise AssertionError("unreachable")  # the loop returns or raises


def _part(a, b, source: str) -> LiveReading | None:
    """The reading over one sub-window; None where nothing was drafted in it."""
    try:
        return difference(a[0], b[0], max(b[1] - a[1], 1e-9), source=source)
    except CounterReset:
        raise
    except InputError:
        return None


def read_live_log(path: str | os.PathLike[str], *, steps: int | None = None, seed: int = 0) -> LiveReading:
    """The accept length of an SGLang server log's "Decode batch ... accept len" lines (see
    :func:`eaglekit.core.serving.live.parse_sglang_log`); ``steps``: the served draft steps, if known."""
    text, cut = read_log(path)
    reading = parse_sglang_log(text, source=os.fspath(path), steps=steps, seed=seed)
    if cut:
        reading = replace(reading, notes=(*reading.notes, "the log is larger than the read limit: its last part "
                                                          "was read"))
    return reading


@dataclass(frozen=True)
class LiveSeries:
    """Successive readings of one server over back-to-back windows (each window starts at the previous one's
    second scrape), and what happened between them (restarts)."""

    readings: tuple[LiveReading, ...]
    notes: tuple[str, ...] = ()

    @property
    def latest(self) -> LiveReading:
        return self.readings[-1]

    def _rows(self) -> list[list[str]]:
        def n(x):
            return "n/a" if x is None else f"{x:,}"
        return [[str(i), "n/a" if r.window_s is None else f"{r.window_s:.1f}", n(r.drafts), n(r.accepted_tokens),
                 r.accept_length.text(), " ".join(f"{c:.2f}" if c is not None else "n/a" for c in r.conditional_acceptance),
                 "n/a" if r.generation_tokens_per_s is None else f"{r.generation_tokens_per_s:,.0f}"]
                for i, r in enumerate(self.readings, 1)]

    _HEAD = ("reading", "window s", "drafts", "accepted", "accept length (95%)", "per-step acceptance",
             "generation tok/s")

    def __str__(self) -> str:
        return text_table(self._HEAD, self._rows(), title=f"{len(self.readings)} successive live readings "
                                                          f"({self.latest.engine}, {self.latest.source})") + \
            "".join(f"\n  * {x}" for x in self.notes)

    def _repr_html_(self) -> str:
        return html_table(self._HEAD, self._rows(), caption=f"{len(self.readings)} successive live readings "
                                                            f"({self.latest.engine})")

    def to_json(self) -> dict[str, Any]:
        return {"readings": [r.to_json() for r in self.readings], "notes": list(self.notes)}


def read_live_series(url: str, *, readings: int = 4, window: float = 10.0, model: str | None = None,
                     timeout: float | None = None, token: str | None = None, name: str | None = None,
                     sleep: Callable[[float], None] = time.sleep) -> LiveSeries:
    """``readings`` back-to-back windows of ``window`` seconds from one server (``readings + 1`` scrapes). A window
    in which the server restarted is left out and said; so is one in which nothing was drafted. ``name``: what
    the readings call the server (default: its address, without credentials)."""
    if not (isinstance(readings, int) and 1 <= readings <= 1000):
        raise InputError(f"readings must be a whole number from 1 to 1000, got {readings!r}.")
    if not (isinstance(window, (int, float)) and 0 < window <= MAX_WINDOW_S):
        raise InputError(f"window must be a number of seconds in (0, {MAX_WINDOW_S:g}], got {window!r}.")
    out: list[LiveReading] = []
    notes: list[str] = []
    with MetricsClient(url, timeout=timeout, token=token) as client:
        before = parse_metrics(client.scrape(), model=model, what=client.shown)
        start = time.monotonic()
        for i in range(readings):
            sleep(window)
            after = parse_metrics(client.scrape(), model=model, what=client.shown)
            end = time.monotonic()
            try:
                out.append(difference(before, after, max(end - start, 1e-9), source=name or client.shown))
            except CounterReset as e:
                notes.append(f"window {i + 1}: {e} Left out.")
            except InputError as e:
                if "no drafts" not in str(e) and "no speculative request" not in str(e):
                    raise
                notes.append(f"window {i + 1}: nothing drafted (idle). Left out.")
            before, start = after, end
    if not out:
        raise InputError(f"{client.shown}: no window held a reading ({'; '.join(notes)}).")
    return LiveSeries(tuple(out), tuple(notes))
