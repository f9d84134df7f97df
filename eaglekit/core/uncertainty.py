"""Figures with their uncertainty: one record, one resampler, one verdict.

Every figure a user decides by (an accept length, a plan cell, a curve prediction) is an
:class:`Interval`: the value, a low and a high bound, and how the bounds were obtained ("bootstrap over
48 requests, 95%"). Every renderer shows it the same way (:meth:`Interval.text`: ``3.58 (3.41-3.72)``;
JSON ``x``, ``x_low``, ``x_high`` through :meth:`Interval.fields`), and :func:`verdict` is the one place
that turns an interval against a threshold into GO / NO-GO / TOO CLOSE TO CALL.

Resampling is seeded by a parameter, so a result is reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from eaglekit.core.errors import InputError

Verdict = Literal["GO", "NO-GO", "TOO CLOSE TO CALL"]

#: the confidence every eaglekit interval is stated at unless a caller asks otherwise
LEVEL = 0.95
#: bootstrap resamples by default: enough for a stable 95% interval's end points to about 1%
RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    """A value with an interval. ``low <= value <= high`` unless the interval is unknown (both None)."""

    value: float
    low: float | None = None
    high: float | None = None
    method: str = ""

    @classmethod
    def exact(cls, value: float, method: str = "exact") -> Interval:
        return cls(value, value, value, method)

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def width(self) -> float | None:
        return None if not self.has_interval else self.high - self.low  # type: ignore[operator]

    def text(self, digits: int = 2) -> str:
        """``3.58 (3.41-3.72)``; the value alone when there is no interval."""
        v = f"{self.value:.{digits}f}"
        if not self.has_interval:
            return v
        return f"{v} ({self.low:.{digits}f}-{self.high:.{digits}f})"

    def fields(self, name: str, digits: int | None = None) -> dict[str, Any]:
        """JSON fields ``name``, ``name_low``, ``name_high`` (non-finite values become None)."""
        def out(x: float | None) -> float | None:
            if x is None or not math.isfinite(x):
                return None
            return round(x, digits) if digits is not None else x
        return {name: out(self.value), f"{name}_low": out(self.low), f"{name}_high": out(self.high)}

    def scaled(self, factor: float) -> Interval:
        """The same estimate times a positive constant."""
        lo = None if self.low is None else self.low * factor
        hi = None if self.high is None else self.high * factor
        return Interval(self.value * factor, lo, hi, self.method)

    def to_json(self) -> dict[str, Any]:
        return {"value": _finite(self.value), "low": _finite(self.low), "high": _finite(self.high),
                "method": self.method}

    def __str__(self) -> str:
        return self.text()


def _finite(x: float | None) -> float | None:
    return x if x is not None and math.isfinite(x) else None


def verdict(estimate: Interval, threshold: float, *, margin: float = 0.0) -> Verdict:
    """GO when the whole interval is above ``threshold`` (by more than ``margin``, a relative tolerance),
    NO-GO when it is wholly below, TOO CLOSE TO CALL when it straddles. An estimate without an interval is
    judged on its value with the margin alone (a figure within ``margin`` of the threshold is too close)."""
    if not math.isfinite(threshold):
        raise InputError(f"a verdict needs a finite threshold, got {threshold!r}.")
    lo = estimate.low if estimate.low is not None else estimate.value
    hi = estimate.high if estimate.high is not None else estimate.value
    band = abs(threshold) * margin
    if lo > threshold + band:
        return "GO"
    if hi < threshold - band:
        return "NO-GO"
    return "TOO CLOSE TO CALL"


def bootstrap_ratio(numerators: Sequence[float], denominators: Sequence[float], *, seed: int = 0,
                    resamples: int = RESAMPLES, level: float = LEVEL, unit: str = "requests") -> Interval:
    """A pooled ratio ``sum(num) / sum(den)`` with a percentile bootstrap over units (requests, prompts):
    each resample draws as many units as there are, with replacement. Accept length = generated tokens /
    cycles pooled over requests is the case this serves. One unit gives the value without an interval."""
    import numpy as np

    num = np.asarray(numerators, dtype=float)
    den = np.asarray(denominators, dtype=float)
    if num.shape != den.shape or num.ndim != 1:
        raise InputError("bootstrap_ratio needs two equally long lists, one entry per unit.")
    _check_level(level)
    total = den.sum()
    if total <= 0:
        raise InputError("bootstrap_ratio: the denominators sum to zero; nothing was counted.")
    value = float(num.sum() / total)
    n = len(num)
    if n < 2:
        return _no_interval(value, unit)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    d = den[picks].sum(axis=1)
    ratios = np.where(d > 0, num[picks].sum(axis=1) / np.where(d > 0, d, 1), np.nan)
    return _percentile(value, ratios[np.isfinite(ratios)], level, f"bootstrap over {n} {unit}")


def bootstrap_difference(before: Sequence[tuple[float, float]], after: Sequence[tuple[float, float]], *,
                         seed: int = 0, resamples: int = RESAMPLES, level: float = LEVEL,
                         unit: str = "prompts") -> Interval:
    """``after`` minus ``before``, each a pooled ratio ``sum(num) / sum(den)`` over (num, den) units measured on the
    same units (two drafters on the same prompts): a paired percentile bootstrap that draws the same units for
    both, so what the prompts share cancels (the interval of a difference is far narrower than the two
    figures' intervals side by side). Fewer than two units give the value without an interval."""
    import numpy as np

    a = np.asarray(before, dtype=float)
    b = np.asarray(after, dtype=float)
    if a.ndim != 2 or a.shape != b.shape or a.shape[1] != 2:
        raise InputError(f"bootstrap_difference needs the same {unit} on both sides: one (count, cycles) pair per "
                         f"unit, got {len(a)} and {len(b)}.")
    _check_level(level)
    if not (np.isfinite(a).all() and np.isfinite(b).all()) or (a < 0).any() or (b < 0).any():
        raise InputError("bootstrap_difference: every count must be a finite number >= 0.")
    if a[:, 1].sum() <= 0 or b[:, 1].sum() <= 0:
        raise InputError("bootstrap_difference: a side's denominators sum to zero; nothing was counted.")
    value = float(b[:, 0].sum() / b[:, 1].sum() - a[:, 0].sum() / a[:, 1].sum())
    n = len(a)
    if n < 2:
        return _no_interval(value, unit)
    picks = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    da, db = a[picks, 1].sum(axis=1), b[picks, 1].sum(axis=1)
    ok = (da > 0) & (db > 0)
    diffs = b[picks, 0].sum(axis=1)[ok] / db[ok] - a[picks, 0].sum(axis=1)[ok] / da[ok]
    return _percentile(value, diffs, level, f"paired bootstrap over {n} {unit}")


def _check_level(level: float) -> None:
    if not (0 < level < 1):
        raise InputError(f"a confidence level is between 0 and 1, got {level!r}.")


def _no_interval(value: float, unit: str) -> Interval:
    return Interval(value, None, None, f"one {unit[:-1] if unit.endswith('s') else unit}: no interval")


def percentile_interval(value: float, resampled: Any, *, level: float = LEVEL, how: str) -> Interval:
    """The ``level`` percentile interval of a statistic's bootstrap resamples around its ``value`` (for a
    statistic :func:`bootstrap_ratio` does not cover); ``how`` names the resampling ("bootstrap over 12 samples")."""
    _check_level(level)
    if len(resampled) == 0:
        return Interval(value, None, None, f"{how}: no resample defined the figure, no interval")
    return _percentile(value, resampled, level, how)


def _percentile(value: float, resampled: Any, level: float, how: str) -> Interval:
    """The percentile interval of bootstrap resamples around ``value`` (which it always holds)."""
    import numpy as np

    tail = (1 - level) / 2
    low, high = (float(x) for x in np.quantile(resampled, [tail, 1 - tail]))
    return Interval(value, min(low, value), max(high, value), f"{how}, {round(level * 100)}%")


def digits_for(estimate: Interval, threshold: float, *, least: int = 2, most: int = 4) -> int:
    """The fewest decimals (``least`` to ``most``) at which the printed interval and threshold read as the verdict
    says: "1.92 (1.89-1.94) against 1.89" looks clear of break-even, "1.920 (1.893-1.940) against 1.895" shows
    why it is TOO CLOSE TO CALL."""
    call = verdict(estimate, threshold)
    low = estimate.low if estimate.low is not None else estimate.value
    high = estimate.high if estimate.high is not None else estimate.value
    for d in range(least, most + 1):
        lo, hi, th = round(low, d), round(high, d), round(threshold, d)
        reads = "GO" if lo > th else "NO-GO" if hi < th else "TOO CLOSE TO CALL" if lo < th < hi else None
        if reads == call:
            return d
    return most
