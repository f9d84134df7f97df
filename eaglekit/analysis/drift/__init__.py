"""Target drift room: :func:`drift` (:mod:`.measure`) compares two quantised targets weight by weight
(sampled with confidence intervals, or every byte on Dask), dequantising with :mod:`.dequant`, planning
with :mod:`.plan`, estimating with :mod:`.stats`, reporting with :mod:`.report`; :func:`hidden_drift`
(:mod:`.hidden`) compares two hidden-state dumps of the same prompts.
"""

from __future__ import annotations

from eaglekit.analysis.drift.hidden import HiddenDrift, hidden_drift
from eaglekit.analysis.drift.measure import drift
from eaglekit.analysis.drift.report import DriftReport

__all__ = ["DriftReport", "HiddenDrift", "drift", "hidden_drift"]
