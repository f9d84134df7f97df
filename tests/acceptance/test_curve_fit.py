"""The accept-length curve's maths (eaglekit.core.acceptance.curve): fits recover the curves they were drawn
from, reach inverts predict, the bootstrap is seeded and says when the data do not constrain a prediction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eaglekit.core.acceptance.curve import (BEYOND, PointCounts, bootstrap_fits, check_increasing, constrained,
                                            fit_curve, held_out_errors, perfect_accept_length, reach_constrained)
from eaglekit.core.errors import InputError

N = [16.0, 32.0, 64.0, 128.0, 256.0, 512.0]


def _loglogistic(n, A=3.6, m=60.0, c=1.3):
    return 1 + (A - 1) / (1 + (m / np.asarray(n)) ** c)


@pytest.mark.parametrize("family,truth", [
    ("loglogistic", lambda n: _loglogistic(n)),
    ("power", lambda n: 3.5 - 6.0 * np.asarray(n) ** -0.5),
    ("exp", lambda n: 3.2 - 2.0 * np.exp(-np.asarray(n) / 90.0)),
])
def test_each_family_recovers_the_curve_it_was_drawn_from(family, truth):
    fit = fit_curve(N, truth(N), cap=4.0, family=family)
    grid = np.geomspace(16, 4096, 9)
    assert np.abs(fit.predict(grid) - truth(grid)).max() < 0.03
    for al in (2.0, 2.8):
        n = fit.reach(al)
        assert float(fit.predict(n)) == pytest.approx(al, abs=1e-6)


def test_the_ceiling_never_passes_the_cap():
    rising = [1.5, 2.0, 2.6, 3.1, 3.6, 3.95]   # a straight line in log n: unbounded without the cap
    for family in ("loglogistic", "power", "exp"):
        fit = fit_curve(N, rising, cap=3.9, family=family)
        assert fit.ceiling <= 3.9 + 1e-12
        assert fit.reach(3.95) == math.inf


def test_perfect_accept_length_caps_the_last_cycle():
    assert perfect_accept_length([23, 23], steps=3) == pytest.approx(46 / 12)   # 6 cycles of <= 4 tokens each
    assert perfect_accept_length([8], steps=3) == 4.0
    assert perfect_accept_length([0, 5], steps=4) == 5.0


def _points(values, prompts=12, seed=0):
    """Per-prompt counts whose pooled ratio is each value: 20 tokens a prompt, cycles around 20 / value."""
    rng = np.random.default_rng(seed)
    out = []
    for n, v in zip(N, values):
        cycles = np.maximum(1, np.round(20 / v + rng.normal(0, 0.8, prompts))).astype(int)
        out.append(PointCounts(n, tuple([20] * prompts), tuple(int(c) for c in cycles)))
    return out


def test_bootstrap_is_seeded_and_brackets_its_value():
    pts = _points(_loglogistic(N))
    a = bootstrap_fits(pts, cap=4.0, seed=3, resamples=300)
    b = bootstrap_fits(pts, cap=4.0, seed=3, resamples=300)
    c = bootstrap_fits(pts, cap=4.0, seed=4, resamples=300)
    p = a.predict(1000)
    assert p == b.predict(1000) and p != c.predict(1000)
    assert p.low <= p.value <= p.high
    assert "6 checkpoints" in p.method and "12 prompts (paired)" in p.method and "seed 3" in p.method
    r = a.reach(2.5)
    assert r.low <= r.value <= r.high


def test_reach_beyond_the_ceiling_and_unconstrained_extrapolation():
    pts = _points(_loglogistic(N, A=2.4))
    boot = bootstrap_fits(pts, cap=4.0, seed=0, resamples=300)
    beyond = boot.reach(3.9)
    assert beyond.value == math.inf and not reach_constrained(beyond)
    # three noisy early points: the fit says little about a thousand times more data
    noisy = [PointCounts(n, (20,) * 4, c) for n, c in
             zip((10.0, 20.0, 40.0), ((14, 9, 18, 12), (12, 7, 15, 9), (9, 6, 16, 8)))]
    far = bootstrap_fits(noisy, cap=6.0, seed=0, resamples=300).predict(40000)
    assert not constrained(far), far
    assert BEYOND == "beyond the fitted ceiling"


def test_held_out_errors_prefer_the_true_family():
    y = _loglogistic(N)
    errs = held_out_errors(N, y, cap=4.0)
    assert errs["loglogistic"] < 0.02 and errs["exp"] > errs["loglogistic"]
    assert held_out_errors(N[:3], y[:3], cap=4.0) == {"loglogistic": None, "power": None, "exp": None}


def test_bad_points_are_refused():
    with pytest.raises(InputError, match="not increasing: checkpoint 3 has 32 after 64"):
        check_increasing([16, 64, 32])
    with pytest.raises(InputError, match="at least 3 checkpoints, got 2"):
        fit_curve([1, 2], [1.5, 2.0], cap=4.0)
    with pytest.raises(InputError, match="positive"):
        fit_curve([0, 1, 2], [1.5, 2.0, 2.2], cap=4.0)
    with pytest.raises(InputError, match="family"):
        fit_curve([1, 2, 3], [1.5, 2.0, 2.2], cap=4.0, family="linear")  # type: ignore[arg-type]
