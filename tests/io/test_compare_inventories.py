"""compare_inventories: a header-only comparison says it compares dtype and shape, never values (item 13:
"same everywhere: True" for d2t sat beside "d2t differ in 1,908 of 2,000")."""

from __future__ import annotations

from eaglekit.analysis.compat.pair import compat
from eaglekit.io.inventory import SAME_SHAPE, compare_inventories
from eaglekit.io.reader import read_inventory


def test_shape_only_column_says_so(demo):
    a, b = demo.drafter("k2"), demo.drafter("k25-finetuned")
    frame = compare_inventories({"A": read_inventory(a), "B": read_inventory(b)})
    assert SAME_SHAPE in frame.columns and "values not compared" in SAME_SHAPE
    assert not any(c == "same everywhere" for c in frame.columns)
    assert bool(frame.loc["d2t", SAME_SHAPE])  # the same shape ...
    report = compat(a, b)
    assert report.vocab["rows_remapped"] > 0  # ... and different values: the column must not read as "equal"
