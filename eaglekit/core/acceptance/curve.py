"""Accept length against training samples: curves through checkpoints, their bootstrap, the choice of form carried
into the interval, and what they predict (pure maths: numbers in, records out).

A training run leaves checkpoints; each has seen ``n`` samples and measures an accept length ``AL(n)``.
Accept length is bounded: at least 1 (the bonus token when no draft is accepted) and at most ``K + 1``
(every draft accepted; on short continuations a little less: :func:`perfect_accept_length`, the cap). How
a run bends with more data is not known in advance, so several forms are fitted (:data:`FAMILIES`), each
within the cap:

* ``"loglogistic"``: ``AL(n) = 1 + (A - 1) / (1 + (m / n)^c)``: rises from the floor 1 (an untrained
  drafter) to the ceiling ``A``, half-way at ``m`` samples. For ``n >> m`` it is the power law below
  (``A - (A - 1) (m / n)^c``), the form data-scaling studies fit (Hestness et al. 2017, arXiv 1712.00409;
  Kaplan et al. 2020, arXiv 2001.08361: loss falls as a power of the data toward a floor).
* ``"power"``: ``AL(n) = A - B * n^(-c)``: a power law toward a ceiling (unbounded below as n -> 0).
* ``"exp"``: ``AL(n) = A - B * exp(-n / s)``: a saturating exponential: it saturates soonest.
* ``"loglinear"``: ``AL(n) = min(cap, a + b ln n)``: a straight line in log samples.
* ``"sigmoid"``: ``AL(n) = L + (cap - L) / (1 + (m / n)^c)``: a logistic in log samples from a fitted floor
  up to the cap: slow, then steep.
* ``"growth"``: ``AL(n) = min(cap, L + B n^c)``: a rise from a fitted floor that has not bent yet.

:func:`average_fits` fits them all and weighs them by fit (:class:`CurveAverage`): a prediction is the
plausible forms' weighted mean, its interval the union of their intervals, and where plausible forms
disagree the points do not pin the curve down. A single form's bootstrap, as narrow as that form, missed a
held-out checkpoint of a run that rose slowly and then steeply (issue 39: 1.56-2.80 predicted, 2.90
measured).

Fitting: for each value of the shape parameters on a log grid the rest is a weighted linear least-squares
fit (weights 1 / variance of each point), with the curve rising and within the cap; the best grid value
wins, refined twice. Uncertainty: a bootstrap that resamples the prompts (the same prompts for every
checkpoint when they share them, so their errors stay paired) and the checkpoints themselves (at least three
distinct sample counts per resample), refitting each time (:func:`bootstrap_fits`). Seeded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from eaglekit.core.errors import InputError
from eaglekit.core.uncertainty import LEVEL, Interval

Family = Literal["loglogistic", "power", "exp", "loglinear", "sigmoid", "growth"]
FAMILIES: dict[str, str] = {"loglogistic": "AL(n) = 1 + (A - 1) / (1 + (m / n)^c)",
                             "power": "AL(n) = A - B * n^(-c)", "exp": "AL(n) = A - B * exp(-n / s)",
                             "loglinear": "AL(n) = min(cap, a + b * ln n)",
                             "sigmoid": "AL(n) = L + (cap - L) / (1 + (m / n)^c)",
                             "growth": "AL(n) = min(cap, L + B * n^c)"}
#: free parameters of each form (the penalty of its information criterion)
PARAMETERS: dict[str, int] = {"loglogistic": 3, "power": 3, "exp": 3, "loglinear": 2, "sigmoid": 3, "growth": 3}
#: a form whose information criterion is within this of the best one's is plausible: its interval joins the union
#: (a relative likelihood exp(-delta / 2) of 1/20 or more)
PLAUSIBLE_DELTA = 6.0
#: plausible forms whose predictions spread less than this (in accept length) do not disagree materially
MATERIAL_SPREAD = 0.1
#: the fewest checkpoints a fit takes (three parameters)
MIN_POINTS = 3
#: bootstrap resamples of a curve by default
CURVE_RESAMPLES = 1000
#: The most bootstrap resamples a fit takes: 20 times the default, far more than a 95% interval needs, and a
#: bound on the (resamples x prompts) draws held in memory (10^9 resamples would ask for tens of GiB).
MAX_RESAMPLES = 20_000
#: a prediction whose interval is wider than this (in accept length) is not constrained by the data
MAX_WIDTH = 1.0
#: a sample count to reach whose interval spans more than this factor (high / low) is not constrained
MAX_RATIO = 10.0
BEYOND = "beyond the fitted ceiling"


@dataclass(frozen=True)
class CurveFit:
    """One fitted curve: ``family`` with ``ceiling`` A (the cap for loglinear, sigmoid and growth), ``scale``
    (m for the log-logistic and the sigmoid, the intercept a for loglinear, B otherwise), ``shape`` (c; s for
    the exponential; the slope b for loglinear) and ``floor`` L (sigmoid and growth; 1 otherwise)."""

    family: str
    ceiling: float
    scale: float
    shape: float
    cap: float
    floor: float = 1.0

    def predict(self, n: float | np.ndarray) -> np.ndarray:
        return _curve(self.family, np.asarray(n, dtype=float), self.ceiling, self.scale, self.shape, self.floor)

    def reach(self, accept_length: float) -> float:
        """Samples at which the curve reaches ``accept_length``; ``inf`` when it is at or above the ceiling."""
        return float(_reach(self.family, accept_length, np.array([self.ceiling]), np.array([self.scale]),
                            np.array([self.shape]), np.array([self.floor]))[0])

    @property
    def formula(self) -> str:
        if self.family == "loglinear":
            return f"AL(n) = min({self.cap:.3f}, {self.scale:.3f} + {self.shape:.3g} * ln n)"
        if self.family == "growth":
            return f"AL(n) = min({self.cap:.3f}, {self.floor:.3f} + {self.scale:.3g} * n^{self.shape:.3g})"
        if self.family == "sigmoid":
            return (f"AL(n) = {self.floor:.3f} + {self.cap - self.floor:.3f} / (1 + ({self.scale:.3g} / n)"
                    f"^{self.shape:.3g})")
        if self.family == "loglogistic":
            return f"AL(n) = 1 + {self.ceiling - 1:.3f} / (1 + ({self.scale:.3g} / n)^{self.shape:.3g})"
        if self.family == "power":
            return f"AL(n) = {self.ceiling:.3f} - {self.scale:.3g} * n^(-{self.shape:.3g})"
        return f"AL(n) = {self.ceiling:.3f} - {self.scale:.3g} * exp(-n / {self.shape:.3g})"

    def to_json(self) -> dict[str, Any]:
        names = {"loglogistic": ("m", "c"), "power": ("B", "c"), "exp": ("B", "s"), "loglinear": ("a", "b"),
                 "sigmoid": ("m", "c"), "growth": ("B", "c")}[self.family]
        out = {"family": self.family, "form": FAMILIES[self.family], "A": self.ceiling, names[0]: self.scale,
               names[1]: self.shape, "ceiling_cap": self.cap}
        if self.family in ("sigmoid", "growth"):
            out["L"] = self.floor
        return out


def _curve(family: str, n, A, B, shape, L=1.0):
    """The curve's accept length at ``n``, never below 1 (the bonus token: a form unbounded below, such as the power
    law or a line in log samples, would otherwise predict less than nothing before its first checkpoint)."""
    return np.maximum(1.0, _raw_curve(family, n, A, B, shape, L))


def _raw_curve(family: str, n, A, B, shape, L=1.0):
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if family == "loglogistic":
            return 1.0 + (A - 1.0) / (1.0 + np.power(B / n, shape))
        if family == "sigmoid":
            return L + (A - L) / (1.0 + np.power(B / n, shape))
        if family == "loglinear":
            return np.minimum(A, B + shape * np.log(n))
        if family == "growth":
            return np.minimum(A, L + B * np.power(n, shape))
        if family == "power":
            return A - B * np.power(n, -shape)
        return A - B * np.exp(-n / shape)


def _reach(family: str, target: float, A: np.ndarray, B: np.ndarray, shape: np.ndarray,
           L: np.ndarray | None = None) -> np.ndarray:
    """Samples at which each curve reaches ``target`` (inf where its ceiling is at or below it)."""
    gap = A - target
    out = np.full(A.shape, np.inf)
    ok = gap > 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        if family == "loglinear":
            n = np.where(shape > 0, np.exp((target - B) / np.where(shape > 0, shape, 1.0)), np.inf)
        elif family == "growth":
            floor = np.asarray(L, dtype=float)
            rise = (target - floor) / np.where(B > 0, B, 1.0)
            n = np.where(target <= floor, 0.0, np.where(B > 0, np.power(np.maximum(rise, 0.0), 1.0 / shape), np.inf))
        elif family in ("loglogistic", "sigmoid"):
            floor = np.ones_like(A) if L is None or family == "loglogistic" else np.asarray(L, dtype=float)
            below = target <= floor
            odds = (A - floor) / np.where(below, 1.0, target - floor) - 1.0   # (m / n)^c at the target
            n = np.where(odds > 0, B / np.power(np.where(odds > 0, odds, 1.0), 1.0 / shape), np.inf)
            n = np.where(below, 0.0, n)
        else:
            ratio = np.where(ok & (B > 0), B / np.where(ok, gap, 1.0), 0.0)
            if family == "power":
                n = np.where(ratio > 0, np.power(np.where(ratio > 0, ratio, 1.0), 1.0 / shape), 0.0)
            else:
                n = np.where(ratio > 1, shape * np.log(np.where(ratio > 1, ratio, 1.0)), 0.0)
    out[ok] = n[ok]
    return out


def _grid(family: str, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """The shape parameters tried first: (scale, shape) pairs for the log-logistic (midpoint m, slope c),
    else (unused, shape); and the grid's step ratio along each (for the refinement)."""
    lo, hi = max(float(n.min()), 1e-9), float(n.max())
    if family in ("loglogistic", "sigmoid"):
        ms, cs = np.geomspace(lo / 30, hi * 30, 40), np.geomspace(0.2, 6.0, 32)
        m, c = np.meshgrid(ms, cs, indexing="ij")
        return m.ravel(), c.ravel(), ms[1] / ms[0], cs[1] / cs[0]
    g = (np.geomspace(0.02, 4.0, 160) if family == "power" else np.geomspace(0.05, 4.0, 160) if family == "growth"
         else np.geomspace(lo / 20, hi * 50, 160))
    return np.zeros_like(g), g, 1.0, g[1] / g[0]


def _fit_many(family: str, n: np.ndarray, y: np.ndarray, w: np.ndarray, cap: float, chunk: int = 64):
    """Fits for many data sets at once: ``n``, ``y``, ``w`` (R, m) -> A, B, shape (R,). For each grid value
    the rest is weighted linear least squares: ``y = A - B x`` (power, exp) or ``y = 1 + (A - 1) x``
    (log-logistic), with ``B >= 0`` / ``A >= 1`` and ``A <= cap``. The best grid value is refined twice on
    a finer grid around it."""
    if family == "loglinear":
        return _fit_loglinear(n, y, w, cap)
    gs, gc, rs0, rc0 = _grid(family, n[np.isfinite(n)])
    outs = []
    for i in range(0, len(n), chunk):
        part = n[i:i + chunk], y[i:i + chunk], w[i:i + chunk]
        rs, rc = rs0, rc0
        A, B, s, L = _fit_chunk(family, *part, cap, gs[None, :], gc[None, :])
        for _ in range(2):   # refine: a finer grid (7 x 7, or 9) spanning one step of the last either side
            f = np.linspace(-1.0, 1.0, 7)
            if family in ("loglogistic", "sigmoid"):
                fm, fc = np.meshgrid(rs ** f, rc ** f, indexing="ij")
                ls, lc = B[:, None] * fm.ravel()[None, :], s[:, None] * fc.ravel()[None, :]
            else:
                lc = s[:, None] * (rc ** np.linspace(-1.0, 1.0, 9))[None, :]
                ls = np.zeros_like(lc)
            A, B, s, L = _fit_chunk(family, *part, cap, ls, lc)
            rs, rc = rs ** (1 / 3), rc ** (1 / 3)
        outs.append((A, B, s, L))
    return tuple(np.concatenate(parts) for parts in zip(*outs))


def _fit_loglinear(n, y, w, cap):
    """``y = a + b ln n`` by weighted least squares (``b >= 0``); the cap clips predictions, not the fit."""
    x = np.log(n)
    sw = w.sum(-1)
    xm, ym = (w * x).sum(-1) / sw, (w * y).sum(-1) / sw
    sxx = (w * (x - xm[:, None]) ** 2).sum(-1)
    b = np.maximum(np.where(sxx > 0, (w * (x - xm[:, None]) * (y - ym[:, None])).sum(-1) / np.where(sxx > 0, sxx, 1.0),
                            0.0), 0.0)
    a = ym - b * xm
    return np.full_like(a, cap), a, b, np.ones_like(a)


def _fit_chunk(family, n, y, w, cap, gs, gc):
    """``gs``, ``gc`` (1 or R, G): the grid of each data set."""
    N = n[:, None, :]                                          # (R, 1, m)
    W = w[:, None, :]
    Y = y[:, None, :]
    L = None
    if family == "loglogistic":
        x = 1.0 / (1.0 + np.power(gs[..., None] / N, gc[..., None]))   # (R, G, m)
        sx2 = (W * x * x).sum(-1)
        a = np.clip((W * x * (Y - 1.0)).sum(-1) / np.where(sx2 > 0, sx2, 1.0), 0.0, cap - 1.0)
        sse = (W * (Y - 1.0 - a[..., None] * x) ** 2).sum(-1)
        A, B = 1.0 + a, np.broadcast_to(gs, a.shape)
    elif family == "sigmoid":   # y - cap x = L (1 - x): the floor L by least squares, 1 <= L < cap
        x = 1.0 / (1.0 + np.power(gs[..., None] / N, gc[..., None]))
        u = 1.0 - x
        su2 = (W * u * u).sum(-1)
        L = np.clip((W * u * (Y - cap * x)).sum(-1) / np.where(su2 > 0, su2, 1.0), 1.0, cap - 1e-6)
        sse = (W * (Y - L[..., None] - (cap - L[..., None]) * x) ** 2).sum(-1)
        A, B = np.full(L.shape, cap), np.broadcast_to(gs, L.shape)
    elif family == "growth":   # y = L + B (n / ref)^c, B >= 0, L >= 1, least squares for each c
        ref = N.max(-1, keepdims=True)
        x = np.power(N / ref, gc[..., None])
        sw = W.sum(-1)
        xm = (W * x).sum(-1) / sw
        ym = (W * Y).sum(-1) / sw
        sxx = (W * (x - xm[..., None]) ** 2).sum(-1)
        sxy = (W * (x - xm[..., None]) * (Y - ym[..., None])).sum(-1)
        Bn = np.maximum(np.where(sxx > 0, sxy / np.where(sxx > 0, sxx, 1.0), 0.0), 0.0)
        L = ym - Bn * xm
        low = L < 1.0                       # the floor may not pass 1: fix it there, refit B
        if low.any():
            sx2 = (W * x * x).sum(-1)
            Bn = np.where(low, np.maximum((W * x * (Y - 1.0)).sum(-1) / np.where(sx2 > 0, sx2, 1.0), 0.0), Bn)
            L = np.where(low, 1.0, L)
        sse = (W * (Y - np.minimum(cap, L[..., None] + Bn[..., None] * x)) ** 2).sum(-1)
        A, B = np.full(L.shape, cap), Bn / np.power(ref[..., 0], gc)
    else:
        x = np.power(N, -gc[..., None]) if family == "power" else np.exp(-N / gc[..., None])
        sw = W.sum(-1)
        xm = (W * x).sum(-1) / sw
        ym = (W * Y).sum(-1) / sw
        sxx = (W * (x - xm[..., None]) ** 2).sum(-1)
        sxy = (W * (x - xm[..., None]) * (Y - ym[..., None])).sum(-1)
        B = np.maximum(np.where(sxx > 0, -sxy / np.where(sxx > 0, sxx, 1.0), 0.0), 0.0)
        A = ym + B * xm
        over = A > cap                      # the ceiling may not pass the cap: fix A there, refit B
        if over.any():
            sx2 = (W * x * x).sum(-1)
            Bc = np.maximum((W * x * (cap - Y)).sum(-1) / np.where(sx2 > 0, sx2, 1.0), 0.0)
            B = np.where(over, Bc, B)
            A = np.where(over, cap, A)
        sse = (W * (Y - (A[..., None] - B[..., None] * x)) ** 2).sum(-1)   # (R, G)
    best = np.argmin(sse, axis=1)
    r = np.arange(len(best))
    gcb = np.broadcast_to(gc, sse.shape)
    floor = np.ones(len(best)) if L is None else L[r, best]
    return A[r, best], B[r, best], gcb[r, best], floor


def fit_curve(samples: Sequence[float], accept_lengths: Sequence[float], *, cap: float, family: Family = "loglogistic",
              weights: Sequence[float] | None = None) -> CurveFit:
    """The curve of ``family`` through (samples, accept length) points, its ceiling at most ``cap`` (K + 1)."""
    n, y = _check_points(samples, accept_lengths)
    if family not in FAMILIES:
        raise InputError(f"curve family must be one of {', '.join(FAMILIES)}, got {family!r}.")
    w = np.ones_like(n) if weights is None else np.asarray(weights, dtype=float)
    A, B, s, L = _fit_many(family, n[None], y[None], w[None], float(cap))
    return CurveFit(family, float(A[0]), float(B[0]), float(s[0]), float(cap), float(L[0]))


def _check_points(samples, accept_lengths) -> tuple[np.ndarray, np.ndarray]:
    n = np.asarray(samples, dtype=float)
    y = np.asarray(accept_lengths, dtype=float)
    if n.ndim != 1 or n.shape != y.shape:
        raise InputError("a curve needs one sample count per accept length.")
    if len(n) < MIN_POINTS:
        raise InputError(f"a curve fit needs at least {MIN_POINTS} checkpoints, got {len(n)}.")
    if not (np.isfinite(n).all() and (n > 0).all()):
        raise InputError("sample counts must be positive numbers.")
    if not np.isfinite(y).all():
        raise InputError("accept lengths must be finite numbers.")
    check_increasing(n.tolist())
    return n, y


def perfect_accept_length(generated: Sequence[int], steps: int) -> float:
    """The accept length of a drafter whose every draft is accepted, on prompts that generated ``generated``
    tokens each: K + 1 tokens a cycle, the last cycle of each prompt capped at its end. No drafter measures
    more on those prompts, so it caps a curve's ceiling more tightly than K + 1 on short continuations."""
    g = [int(x) for x in generated if int(x) > 0]
    cycles = sum(-(-x // (steps + 1)) for x in g)
    return sum(g) / cycles if cycles else float(steps + 1)


def check_increasing(samples: Sequence[float], *, where: str = "") -> None:
    """Checkpoints come in training order: their sample counts must rise strictly."""
    for i in range(1, len(samples)):
        if not samples[i] > samples[i - 1]:
            raise InputError(f"{where}sample counts are not increasing: checkpoint {i + 1} has {samples[i]:g} after "
                             f"{samples[i - 1]:g}; give the checkpoints in training order, each with more samples.")


# -- the bootstrap ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PointCounts:
    """One checkpoint's per-prompt counts: tokens generated and cycles, prompt by prompt (the accept length is
    their pooled ratio)."""

    samples: float
    generated: tuple[int, ...]
    cycles: tuple[int, ...]

    @property
    def accept_length(self) -> float:
        c = sum(self.cycles)
        return sum(self.generated) / c if c else float("nan")


@dataclass(frozen=True)
class CurveBootstrap:
    """The fit and its resampled fits (``A``, ``B``, ``shape``, one entry per resample)."""

    fit: CurveFit
    A: np.ndarray
    B: np.ndarray
    shape: np.ndarray
    method: str
    level: float = LEVEL
    floor: np.ndarray | None = None
    #: the points fitted and their weights (1 / variance), for the fit's chi-square
    points: tuple[tuple[float, float, float], ...] = ()

    def predict(self, n: float) -> Interval:
        value = float(self.fit.predict(n))
        draws = _curve(self.fit.family, float(n), self.A, self.B, self.shape, 1.0 if self.floor is None else self.floor)
        return _interval(value, draws, self.level, self.method)

    def reach(self, accept_length: float) -> Interval:
        """Samples to reach ``accept_length``: value inf when the fit's ceiling is at or below it; ``high``
        None when more than the interval's tail of resamples never reach it (unbounded)."""
        value = self.fit.reach(accept_length)
        draws = _reach(self.fit.family, accept_length, self.A, self.B, self.shape, self.floor)
        return _interval(value, draws, self.level, self.method)

    @property
    def chi_square(self) -> float:
        """The weighted squared misfit of the fit at its points (the weights are 1 / variance)."""
        return float(sum(w * (y - float(self.fit.predict(n))) ** 2 for n, y, w in self.points))

    def ceiling(self) -> Interval:
        return _interval(self.fit.ceiling, self.A, self.level, self.method)


def _interval(value: float, draws: np.ndarray, level: float, method: str) -> Interval:
    tail = (1 - level) / 2
    d = np.sort(np.asarray(draws, dtype=float))     # order statistics: inf draws (never reached) stay inf
    lo, hi = float(d[int(math.floor(tail * (len(d) - 1)))]), float(d[int(math.ceil((1 - tail) * (len(d) - 1)))])
    if not math.isfinite(lo):
        return Interval(value, None, None, method + "; unbounded: most resamples never reach it")
    low = min(lo, value) if math.isfinite(value) else lo
    high = (max(hi, value) if math.isfinite(value) else None) if math.isfinite(hi) else None
    return Interval(value, low, high, method)


def _weights(points: Sequence[PointCounts], pair: bool, picks: np.ndarray | None, rng) -> np.ndarray:
    """1 / variance of each point's accept length, from a small bootstrap over its prompts (floored)."""
    out = []
    for p in points:
        g, c = np.asarray(p.generated, float), np.asarray(p.cycles, float)
        if len(g) < 2:
            out.append(1.0)
            continue
        idx = picks if pair and picks is not None else rng.integers(0, len(g), size=(200, len(g)))
        d = c[idx].sum(1)
        v = float(np.var(g[idx].sum(1) / np.where(d > 0, d, 1)))
        out.append(1.0 / max(v, 1e-4))
    return np.asarray(out)


def bootstrap_fits(points: Sequence[PointCounts], *, cap: float, family: Family = "loglogistic", seed: int = 0,
                   resamples: int = CURVE_RESAMPLES, level: float = LEVEL) -> CurveBootstrap:
    """Fit ``points`` and refit ``resamples`` resamples: prompts drawn with replacement (the same draw for every
    checkpoint when all have the same number of prompts: the same prompts measured them), and checkpoints
    drawn with replacement, keeping draws with at least :data:`MIN_POINTS` distinct sample counts."""
    if isinstance(resamples, bool) or not isinstance(resamples, (int, np.integer)) or not 1 <= resamples <= MAX_RESAMPLES:
        raise InputError(f"resamples must be a whole number from 1 to {MAX_RESAMPLES:,}, got {str(resamples)[:40]}.")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 63:
        raise InputError(f"the bootstrap seed must be a whole number from 0 to 2**63 - 1, got {str(seed)[:40]}.")
    n = np.asarray([p.samples for p in points], dtype=float)
    y = np.asarray([p.accept_length for p in points], dtype=float)
    _check_points(n, y)
    m = len(points)
    sizes = {len(p.generated) for p in points}
    pair = len(sizes) == 1
    rng = np.random.default_rng(seed)
    w = _weights(points, pair, rng.integers(0, next(iter(sizes)), size=(200, next(iter(sizes)))) if pair else None, rng)
    fit = fit_curve(n, y, cap=cap, family=family, weights=w)
    # prompts: the accept length of every checkpoint under each resample (R, m)
    ys = np.empty((resamples, m))
    shared = rng.integers(0, next(iter(sizes)), size=(resamples, next(iter(sizes)))) if pair else None
    for j, p in enumerate(points):
        g, c = np.asarray(p.generated, float), np.asarray(p.cycles, float)
        idx = shared if shared is not None else rng.integers(0, len(g), size=(resamples, len(g)))
        d = c[idx].sum(1)
        ys[:, j] = g[idx].sum(1) / np.where(d > 0, d, 1)
    # checkpoints: case resampling, redrawn until at least MIN_POINTS distinct sample counts
    rows = np.empty((resamples, m), dtype=int)
    filled = 0
    for _ in range(200):
        draw = rng.integers(0, m, size=(resamples, m))
        draw.sort(axis=1)
        distinct = (np.diff(draw, axis=1) > 0).sum(1) + 1
        ok = draw[distinct >= MIN_POINTS][:resamples - filled]
        rows[filled:filled + len(ok)] = ok
        filled += len(ok)
        if filled == resamples:
            break
    if filled < resamples:   # exactly MIN_POINTS checkpoints: only the all-distinct draw qualifies
        rows[filled:] = np.arange(m)
    r = np.arange(resamples)[:, None]
    A, B, s, L = _fit_many(family, n[rows], ys[r, rows], w[rows], float(cap))
    method = bootstrap_method(points, seed=seed, resamples=resamples, level=level)
    return CurveBootstrap(fit, A, B, s, method, level, L, tuple(zip(n.tolist(), y.tolist(), w.tolist())))


def bootstrap_method(points: Sequence[PointCounts], *, seed: int, resamples: int, level: float = LEVEL) -> str:
    sizes = {len(p.generated) for p in points}
    pair = len(sizes) == 1
    prompts = " x ".join(str(x) for x in sorted(sizes)) if pair else "each checkpoint's"
    return (f"bootstrap over {len(points)} checkpoints and {prompts} prompts{' (paired)' if pair else ''}, "
            f"{resamples} resamples, seed {seed}, {round(level * 100)}%")


def held_out_errors(samples: Sequence[float], accept_lengths: Sequence[float], *, cap: float,
                    weights: Sequence[float] | None = None, families: Sequence[str] = tuple(FAMILIES)) -> dict[str, float | None]:
    """How well each family predicts checkpoints it did not see: fit on the first ``j`` points, predict point
    ``j + 1``, for every ``j >= MIN_POINTS``; the mean absolute error (None with fewer than four points)."""
    n, y = _check_points(samples, accept_lengths)
    w = np.ones_like(n) if weights is None else np.asarray(weights, dtype=float)
    out: dict[str, float | None] = {}
    for fam in families:
        errs = [abs(float(fit_curve(n[:j], y[:j], cap=cap, family=fam, weights=w[:j]).predict(n[j])) - y[j])  # type: ignore[arg-type]
                for j in range(MIN_POINTS, len(n))]
        out[fam] = float(np.mean(errs)) if errs else None
    return out


def constrained(i: Interval, *, max_width: float = MAX_WIDTH) -> bool:
    """A predicted accept length is constrained when its interval is bounded and no wider than ``max_width``."""
    return i.has_interval and (i.width or 0.0) <= max_width


def reach_constrained(i: Interval, *, max_ratio: float = MAX_RATIO) -> bool:
    """A sample count is constrained when its interval is bounded and spans at most a factor ``max_ratio``."""
    if not i.has_interval or not math.isfinite(i.value):
        return False
    lo = max(i.low or 0.0, 1e-12)
    return (i.high or math.inf) / lo <= max_ratio


# -- several forms: which fit, and the choice of form carried into the interval ---------------------------
#: the forms fitted by default (every one of :data:`FAMILIES`): saturating early (exp), saturating late
#: (power, loglogistic, sigmoid), straight in log samples (loglinear), still rising toward the cap (growth)
AVERAGED: tuple[str, ...] = ("loglogistic", "power", "exp", "loglinear", "sigmoid", "growth")


@dataclass(frozen=True)
class FormFit:
    """One form fitted within an average: its bootstrap, its information-criterion distance ``delta`` from the
    best form, its Akaike weight among the plausible forms (0 for the implausible) and whether it is plausible."""

    boot: CurveBootstrap
    delta: float
    weight: float

    @property
    def family(self) -> str:
        return self.boot.fit.family

    @property
    def plausible(self) -> bool:
        return self.weight > 0


@dataclass(frozen=True)
class CurveAverage:
    """Every form of :data:`AVERAGED` fitted to the same points (the same bootstrap draws), weighted by fit.

    Weights: QAIC, ``chi2 / c + 2 k`` with ``chi2`` the weighted misfit (weights 1 / variance of each point from
    its prompts), ``k`` the form's parameters and ``c`` the overdispersion (the best three-parameter form's
    ``chi2 / (points - 3)``, at least 1: checkpoints scatter more than their prompts say when training itself is
    noisy); Burnham & Anderson, *Model Selection and Multimodel Inference* (2002), sections 2.9 and 4.2. A
    form within :data:`PLAUSIBLE_DELTA` of the best is plausible; the rest get weight 0. A prediction is the
    plausible forms' weighted mean; its interval is the union of their bootstrap intervals, so the choice of
    form is carried into it (a form-blind bootstrap is as narrow as one form's and misses a curve of another
    shape). Where plausible forms disagree (one's prediction outside another's interval) the points do not pin
    the curve down (:meth:`disagree`)."""

    forms: tuple[FormFit, ...]
    overdispersion: float
    base_method: str
    level: float = LEVEL

    @property
    def plausible(self) -> tuple[FormFit, ...]:
        return tuple(f for f in self.forms if f.plausible)

    @property
    def leading(self) -> FormFit:
        return max(self.forms, key=lambda f: f.weight)

    @property
    def fit(self) -> CurveFit:
        """The leading form's fit (the highest weight)."""
        return self.leading.boot.fit

    @property
    def method(self) -> str:
        names = ", ".join(f"{f.family} {f.weight:.2f}" for f in self.plausible)
        return (f"union of the plausible forms' intervals ({names}; weights by QAIC), each a {self.base_method}")

    def value(self, n: float) -> float:
        """The weighted mean of the plausible forms' curves at ``n``."""
        return float(sum(f.weight * float(f.boot.fit.predict(n)) for f in self.plausible))

    def predict(self, n: float) -> Interval:
        parts = [f.boot.predict(n) for f in self.plausible]
        return _union(self.value(n), parts, self.method)

    def spread(self, n: float) -> tuple[tuple[str, float], tuple[str, float]]:
        """The lowest and highest plausible form's prediction at ``n``: (family, value) each."""
        vals = sorted(((f.family, float(f.boot.fit.predict(n))) for f in self.plausible), key=lambda x: x[1])
        return vals[0], vals[-1]

    def disagree(self, n: float) -> bool:
        """Whether plausible forms disagree at ``n``: one's prediction lies outside another's interval, and their
        predictions spread by :data:`MATERIAL_SPREAD` or more."""
        (_, low), (_, high) = self.spread(n)
        if high - low < MATERIAL_SPREAD:
            return False
        parts = [f.boot.predict(n) for f in self.plausible]
        for a in parts:
            for b in parts:
                if b.has_interval and not (b.low - 1e-9 <= a.value <= b.high + 1e-9):  # type: ignore[operator]
                    return True
        return False

    def reach(self, accept_length: float) -> Interval:
        parts = [f.boot.reach(accept_length) for f in self.plausible]
        return _union(self._reach_value(accept_length), parts, self.method, samples=True)

    def ceiling(self) -> Interval:
        parts = [f.boot.ceiling() for f in self.plausible]
        return _union(sum(f.weight * f.boot.fit.ceiling for f in self.plausible), parts, self.method)

    def _reach_value(self, target: float) -> float:
        """Where the averaged curve reaches ``target`` (it rises with n: bisection in log n); inf past its top."""
        lo, hi = 1e-6, 1e15
        if self.value(hi) < target:
            return math.inf
        if self.value(lo) >= target:
            return lo
        for _ in range(200):
            mid = math.sqrt(lo * hi)
            if self.value(mid) >= target:
                hi = mid
            else:
                lo = mid
            if hi / lo < 1 + 1e-9:
                break
        return hi


def _union(value: float, parts: Sequence[Interval], method: str, *, samples: bool = False) -> Interval:
    """The union of intervals (with ``value`` inside): unbounded above when any part is (a part without an interval:
    most of that form's resamples never reach a sample count); no interval when no part has one."""
    lows = [p.low for p in parts if p.low is not None]
    highs = [p.high for p in parts]
    if not lows:
        return Interval(value, None, None, method + "; unbounded: most resamples of every plausible form never reach it"
                        if samples else method)
    low = min(min(lows), value) if math.isfinite(value) else min(lows)  # type: ignore[type-var]
    if any(h is None or not math.isfinite(h) for h in highs) or not math.isfinite(value):
        return Interval(value, low, None, method)
    return Interval(value, low, max(max(highs), value), method)  # type: ignore[type-var]


def average_fits(points: Sequence[PointCounts], *, cap: float, families: Sequence[str] = AVERAGED, seed: int = 0,
                 resamples: int = CURVE_RESAMPLES, level: float = LEVEL) -> CurveAverage:
    """Fit every form of ``families`` to ``points`` (each with :func:`bootstrap_fits`, the same seed: the same
    resamples) and weigh them (:class:`CurveAverage`)."""
    unknown = [f for f in families if f not in FAMILIES]
    if unknown or not families:
        raise InputError(f"curve forms must be among {', '.join(FAMILIES)}, got {', '.join(unknown) or 'none'}.")
    boots = [bootstrap_fits(points, cap=cap, family=f, seed=seed, resamples=resamples, level=level)  # type: ignore[arg-type]
             for f in families]
    m = len(points)
    chi = [b.chi_square for b in boots]
    three = [c for c, f in zip(chi, families) if PARAMETERS[f] == 3]
    over = max(1.0, min(three) / (m - 3)) if three and m > 3 else 1.0
    crit = [c / over + 2 * PARAMETERS[f] for c, f in zip(chi, families)]
    best = min(crit)
    delta = [c - best for c in crit]
    rel = [math.exp(-d / 2) if d <= PLAUSIBLE_DELTA else 0.0 for d in delta]
    total = sum(rel)
    forms = tuple(FormFit(b, d, r / total) for b, d, r in zip(boots, delta, rel))
    return CurveAverage(forms, over, bootstrap_method(points, seed=seed, resamples=resamples, level=level), level)
