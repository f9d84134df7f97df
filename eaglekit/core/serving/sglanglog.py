"""SGLang's server log, read for its accept length: the scheduler's ``Decode batch ... accept len: X`` lines.

SGLang's scheduler logs every ``--decode-log-interval`` batches (sgl-project/sglang
``python/sglang/srt/managers/scheduler_metrics_mixin.py``, ``log_decode_stats``)::

    [2025-06-18 10:00:08 TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.02, accept len: 2.50, ...

(older releases: ``Decode batch. #running-req: ...``). Its accept len is verified tokens / verify calls over the
interval, bonus token in: vLLM's convention. Each line is read with fixed-width patterns over a line of at most
:data:`MAX_LINE_CHARS` characters (a longer one is not SGLang's and is skipped and counted), so a hostile log costs
linear time. A decode line whose timestamp is not a real time (month 13, February 30, 25:61:61, digits other than
ASCII) or whose ``#running-req`` is not a count of at most nine digits is refused with its line number: the log
is not SGLang's, or is corrupt, and a reading from it would not be one.

The interval is a bootstrap over the lines; past :data:`MAX_UNITS` lines, consecutive lines are pooled into that
many blocks first (a block bootstrap), so its memory is ``resamples x MAX_UNITS`` whatever the log's length
(:func:`pooled_blocks`), and a block of neighbouring lines carries the correlation between them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime

from eaglekit.core.errors import InputError
from eaglekit.core.redact import shown
from eaglekit.core.serving.livereading import LiveReading
from eaglekit.core.uncertainty import RESAMPLES, Interval, bootstrap_ratio

__all__ = ["MAX_LINE_CHARS", "MAX_LOG_LINES", "MAX_UNITS", "bootstrap_bytes", "parse_sglang_log", "pooled_blocks"]

#: Lines of a log read for "accept len" (the rest is ignored, and said so).
MAX_LOG_LINES = 2_000_000
#: Longest line read (SGLang's decode line is about 250 characters).
MAX_LINE_CHARS = 4096
#: Units the bootstrap resamples at most: more lines are pooled into this many consecutive blocks.
MAX_UNITS = 1000
#: The most draft steps an accept length may stand for (accept len <= steps + 1).
MAX_STEPS = 64

_DECODE = "Decode batch"
_RUNNING = re.compile(r"#running-req:[ \t]{0,8}([0-9]{1,64})", re.ASCII)
_ACCEPT = re.compile(r"accept len:[ \t]{0,8}([0-9]{1,6}(?:\.[0-9]{1,12})?)", re.ASCII)
_TPS = re.compile(r"gen throughput \(token/s\):[ \t]{0,8}([0-9]{1,12}(?:\.[0-9]{1,12})?)", re.ASCII)
_TIME = re.compile(r"\[([^\]\s]{1,12}-[^\]\s]{1,8} [^\]\s]{1,12})[ \]]")  # a date-like stamp, any digits


def pooled_blocks(nums: Sequence[float], dens: Sequence[float], units: int = MAX_UNITS
                  ) -> tuple[list[float], list[float]]:
    """``nums``, ``dens`` pooled into at most ``units`` consecutive blocks of (nearly) equal size: the block
    sums, in order. As many as there are when there are no more than ``units``."""
    n = len(nums)
    if n <= units:
        return list(nums), list(dens)
    bn, bd = [], []
    for b in range(units):
        lo, hi = b * n // units, (b + 1) * n // units
        bn.append(float(sum(nums[lo:hi])))
        bd.append(float(sum(dens[lo:hi])))
    return bn, bd


def bootstrap_bytes(units: int, resamples: int = RESAMPLES) -> int:
    """The bootstrap's largest arrays over ``units``: the picks and the two gathered ones (8 bytes each)."""
    return 3 * 8 * resamples * units


def _time(line: str, n: int, source: str) -> datetime | None:
    m = _TIME.match(line)
    if not m:
        return None
    text = m.group(1)
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}", text, re.ASCII):
        raise InputError(f"{source}: line {n:,}: timestamp {shown(text)!r} is not YYYY-MM-DD HH:MM:SS in ASCII digits; "
                         "not SGLang's log (or a corrupt one).")
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M:%S")
    except ValueError as e:
        raise InputError(f"{source}: line {n:,}: timestamp {text!r} is not a real time ({e}); not SGLang's log "
                         "(or a corrupt one).") from e


def parse_sglang_log(text: str, *, source: str = "log", steps: int | None = None, seed: int = 0) -> LiveReading:
    """The accept length of SGLang's decode log lines: each line's figure over its ``decode_log_interval`` batches,
    pooled weighted by the line's running requests (the lines do not print their verify count; running requests
    x the interval is its size up to requests finishing mid-interval), with a bootstrap over the lines (over
    blocks of consecutive lines past :data:`MAX_UNITS`)."""
    nums: list[float] = []
    dens: list[float] = []
    tps: list[float] = []
    times: list[datetime] = []
    lines = text.splitlines()
    notes: list[str] = []
    if len(lines) > MAX_LOG_LINES:
        notes.append(f"only the last {MAX_LOG_LINES:,} of {len(lines):,} lines were read")
        lines = lines[-MAX_LOG_LINES:]
    top = MAX_STEPS + 1 if steps is None else steps + 1
    long_lines = 0
    for n, line in enumerate(lines, 1):
        if _DECODE not in line:
            continue
        if len(line) > MAX_LINE_CHARS:
            long_lines += 1
            continue
        r, a = _RUNNING.search(line), _ACCEPT.search(line)
        if not (r and a and r.start() < a.start()):
            continue
        if len(r.group(1)) > 9:
            raise InputError(f"{source}: line {n:,}: #running-req has more than nine digits; not SGLang's log "
                             "(a server runs at most a few thousand requests).")
        running, L = int(r.group(1)), float(a.group(1))
        stamp = _time(line, n, source)
        if running <= 0 or L <= 0:  # an idle interval prints accept len 0
            continue
        if L < 1 or L > top + 0.005:
            raise InputError(f"{source}: line {n:,}: 'accept len: {a.group(1)}' is outside 1..{top}; not SGLang's "
                             "decode log (or --steps is wrong).")
        nums.append(L * running)
        dens.append(float(running))
        t = _TPS.search(line)
        if t:
            tps.append(float(t.group(1)))
        if stamp is not None:
            times.append(stamp)
    if not nums:
        raise InputError(f"{source}: no 'Decode batch ... accept len: X' line with running requests; is it the log of "
                         "an SGLang server with speculative decoding (the scheduler logs one every "
                         "--decode-log-interval batches)?")
    if long_lines:
        notes.append(f"{long_lines:,} 'Decode batch' lines longer than {MAX_LINE_CHARS:,} characters were skipped")
    bn, bd = pooled_blocks(nums, dens)
    unit = "log lines" if len(bn) == len(nums) else f"blocks of consecutive log lines ({len(nums):,} lines)"
    interval = bootstrap_ratio(bn, bd, seed=seed, unit=unit)
    interval = Interval(interval.value, interval.low, interval.high,
                        interval.method + " (each line weighted by its running requests)")
    window = (max(times) - min(times)).total_seconds() if len(times) > 1 else None
    notes.append(f"{len(nums)} decode log lines; SGLang's 'accept len' counts the bonus token")
    return LiveReading("sglang", source, window, None, None, None, (), None, interval, None,
                       sum(dens) / len(dens), steps, (), {}, {}, None,
                       sum(tps) / len(tps) if tps else None, tuple(notes))
