"""Similarity figures: the heatmap's scale and hover ranges, the overview's one row per tensor, the page."""

from __future__ import annotations

import numpy as np
import pytest

from eaglekit.core.errors import InputError
from eaglekit.view.figures import heatmap, overview, report_page
from eaglekit.analysis.similarity.report import SimilarityReport, TensorSimilarity, measures_from_sums


def _tensor(name="w", rows=10, cols=(8, 14), grid=(4, 3), cos_by_row=None):
    """A TensorSimilarity built from sums: unit-norm cells whose cosine is ``cos_by_row[i]`` per row band."""
    from eaglekit.analysis.similarity.plan import split_edges

    gr, gc = grid
    cos = np.repeat(np.asarray(cos_by_row if cos_by_row is not None else np.linspace(1, -1, gr))[:, None], gc, 1)
    sums = np.stack([np.ones((gr, gc)), np.ones((gr, gc)), cos, 2 - 2 * cos], -1)  # aa, bb, ab, dd
    return TensorSimilarity(name=name, tensor=name, shape_a=(rows, 20), shape_b=(rows, 20), rows_compared=rows,
                            cols=cols, row_edges=tuple(split_edges(rows, gr)),
                            col_edges=tuple(split_edges(cols[1] - cols[0], gc)), sums=sums)


def test_measures_from_sums():
    m = measures_from_sums(np.array([[4.0, 9.0, 6.0, 1.0], [0.0, 1.0, 0.0, 1.0]]))
    assert m["cosine"][0] == pytest.approx(1.0) and m["norm_ratio"][0] == pytest.approx(1.5)
    assert m["rel_diff"][0] == pytest.approx(0.5)
    assert np.isnan(m["cosine"][1]) and np.isnan(m["rel_diff"][1])  # ||a|| = 0: undefined, not an error


def test_heatmap_diverging_scale_and_hover_ranges():
    ts = _tensor()
    fig = heatmap(ts)
    (trace,) = fig.data
    assert (trace.zmin, trace.zmax, trace.zmid) == (-1.0, 1.0, 0.0) and trace.colorscale[0][1] == "rgb(103,0,31)"
    assert list(trace.x) == [8, 10, 12, 14] and list(trace.y) == [0, 3, 6, 8, 10]  # edges in tensor columns
    assert trace.customdata[1][2].tolist()[:4] == [3, 5, 12, 13]  # rows 3-5, cols 12-13
    assert trace.customdata[1][2][4] == pytest.approx(np.linspace(1, -1, 4)[1])
    assert "rows %{customdata[0]:.0f}–%{customdata[1]:.0f}" in trace.hovertemplate
    assert fig.layout.yaxis.autorange == "reversed" and fig.layout.title.text.startswith("w: cosine")
    fixed = heatmap(ts, measure="rel_diff", zmax=0.8)
    assert (fixed.data[0].zmin, fixed.data[0].zmax, fixed.data[0].zmid) == (0.0, 0.8, None)
    with pytest.raises(InputError, match="measure must be one of cosine, rel_diff, norm_ratio; got 'l2'"):
        heatmap(ts, measure="l2")


def test_overview_one_row_per_tensor():
    ramp = _tensor("ramp", rows=64, grid=(4, 2), cos_by_row=[1.0, 0.5, 0.0, -0.5])
    flat = _tensor("flat", rows=3, grid=(3, 2), cos_by_row=[0.9, 0.9, 0.9])
    report = SimilarityReport(a="A", b="B", grid=(4, 2), tensors=(ramp, flat))
    fig = overview(report, bins=8)
    bar, strip = fig.data
    assert list(bar.y) == ["ramp", "flat"] and list(bar.x) == pytest.approx([0.25, 0.9])
    assert np.asarray(strip.z).shape == (2, 8)
    assert np.asarray(strip.z)[0].tolist() == [1.0, 1.0, 0.5, 0.5, 0.0, 0.0, -0.5, -0.5]  # the row bands, in order
    assert np.asarray(strip.customdata)[0, 2, :2].tolist() == [16, 31]  # band 2 shows rows 16-31


def test_page_inlines_plotly_once():
    report = SimilarityReport(a="A", b="B", grid=(4, 3), tensors=(_tensor("w"), _tensor("v")))
    page = report_page(report)
    assert page.startswith("<!DOCTYPE html>") and page.count("* plotly.js v") == 1
    assert page.count('class="plotly-graph-div"') == 3 and "<table" in page
