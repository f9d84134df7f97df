"""The conclusion's per-step acceptances show what their digits can show: a rate below 1 never prints as 1.00 (beside
an accept length of 3.94 at K = 3 that would read as a contradiction)."""

from __future__ import annotations

from types import SimpleNamespace

from eaglekit.analysis.acceptance.conclusion import _steps


def test_a_rate_below_one_keeps_a_third_decimal():
    r = SimpleNamespace(per_step_acceptance=(0.9968, 0.9951, 1.0, 0.72, None))
    assert _steps(r) == "0.997, 0.995, 1.00, 0.72, -"
    assert _steps(r, 2) == "0.997, 0.995"
