"""Plotly figures of a weight-similarity report: one tensor's block grid, and all tensors at a glance.

Presentation only: everything is derived from the cell sums of :class:`~eaglekit.analysis.similarity.report.
TensorSimilarity` (no tensor bytes are read here). plotly is imported inside each function.
Rows are the tensor's output dimension (drawn top to bottom, as a matrix prints), columns its input.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np

from eaglekit.view.page import standalone_page, write_page
from eaglekit.analysis.similarity.report import (
    MEASURES,
    Measure,
    TensorSimilarity,
    check_measure,
    measures_from_sums,
)

if TYPE_CHECKING:
    from eaglekit.analysis.similarity.report import SimilarityReport

#: Per measure: colour scale, natural range (None: from the data) and the scale's midpoint.
SCALES: dict[str, tuple[str, float | None, float | None, float | None]] = {
    "cosine": ("RdBu", -1.0, 1.0, 0.0),       # diverging: agree (blue) / unrelated (white) / opposed (red)
    "rel_diff": ("Reds", 0.0, None, None),    # sequential: 0 = identical
    "norm_ratio": ("RdBu", None, None, 1.0),  # diverging around equal norms
}
LABELS = {"cosine": "cosine", "rel_diff": "‖a−b‖/‖a‖", "norm_ratio": "‖b‖/‖a‖"}


def heatmap(ts: TensorSimilarity | SimilarityReport, name: str | None = None, *, measure: Measure = "cosine",
            zmin: float | None = None, zmax: float | None = None):
    """The block grid of one tensor (or part) as a heatmap, diverging around the measure's neutral value.

    Hovering a cell shows its row and column ranges (in the tensor's own coordinates; aligned
    lm_head rows count shared tokens in target-id order) and all three measures of that cell.
    ``zmin``/``zmax`` override the colour range (default: [-1, 1] for cosine). Pass a tensor's record, or
    a report and the tensor's ``name``.
    """
    import plotly.graph_objects as go

    if name is not None:
        ts = ts[name]
    measure = check_measure(measure)
    scale, lo, hi, mid = SCALES[measure]
    grids = measures_from_sums(ts.sums)  # measure -> (gr, gc), all three from one pass
    re, ce = np.asarray(ts.row_edges), np.asarray(ts.col_edges) + ts.cols[0]
    gr, gc = ts.grid_shape
    custom = np.empty((gr, gc, 7), dtype=np.float64)
    custom[..., 0], custom[..., 1] = re[:-1, None], re[1:, None] - 1
    custom[..., 2], custom[..., 3] = ce[None, :-1], ce[None, 1:] - 1
    for k, m in enumerate(MEASURES):
        custom[..., 4 + k] = grids[m]
    row_word = "shared tokens" if ts.aligned else "rows"
    hover = (f"{row_word} %{{customdata[0]:.0f}}–%{{customdata[1]:.0f}}<br>"
             "cols %{customdata[2]:.0f}–%{customdata[3]:.0f}<br>"
             "cosine %{customdata[4]:.4f}<br>‖a−b‖/‖a‖ %{customdata[5]:.4f}<br>"
             "‖b‖/‖a‖ %{customdata[6]:.4f}<extra></extra>")
    z = grids[measure]
    fig = go.Figure(go.Heatmap(
        z=z, x=ce, y=re, customdata=custom, hovertemplate=hover, colorscale=scale,
        zmin=_first(zmin, lo, _nanmin(z)), zmax=_first(zmax, hi, _nanmax(z)),
        zmid=mid if zmin is None and zmax is None else None,
        colorbar={"title": {"text": LABELS[measure]}}))
    total = getattr(ts, measure)
    fig.update_layout(
        title={"text": f"{html.escape(ts.name)}: {LABELS[measure]} {total:.4f}"},
        xaxis={"title": {"text": f"input column ({ts.cols[0]}–{ts.cols[1] - 1})"}, "constrain": "domain"},
        yaxis={"title": {"text": "shared token (by target id)" if ts.aligned else "output row"},
               "autorange": "reversed"},
        height=460, margin={"l": 70, "r": 20, "t": 60, "b": 50})
    return fig


def overview(report: SimilarityReport, *, measure: Measure = "cosine", bins: int = 32,
             zmin: float | None = None, zmax: float | None = None):
    """All compared tensors, one row each: the whole-tensor measure (left) and how it varies along the
    tensor's rows (right: the rows cut into ``bins`` bands, each band all columns together).
    ``zmin``/``zmax`` override the colour range (default: the measure's natural range, else the data's)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    measure = check_measure(measure)
    scale, lo, hi, mid = SCALES[measure]
    tensors = list(report.tensors)
    names = [t.name for t in tensors]
    profile = np.full((len(tensors), bins), np.nan)
    ranges = np.zeros((len(tensors), bins, 2))
    for i, t in enumerate(tensors):
        prof = t.row_profile(measure)  # (gr,)
        edges = np.asarray(t.row_edges)
        centres = (np.arange(bins) + 0.5) / bins * t.rows_compared
        cell = np.clip(np.searchsorted(edges, centres, side="right") - 1, 0, len(prof) - 1)
        profile[i] = prof[cell]
        ranges[i, :, 0], ranges[i, :, 1] = edges[cell], edges[cell + 1] - 1
    totals = [getattr(t, measure) for t in tensors]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.28, 0.72], horizontal_spacing=0.03,
                        subplot_titles=("whole tensor", "along the output rows (first → last)"))
    marker = {"color": totals, "colorscale": scale, "cmin": _first(zmin, lo, _nanmin(np.array(totals))),
              "cmax": _first(zmax, hi, _nanmax(np.array(totals)))}
    fig.add_trace(go.Bar(x=totals, y=names, orientation="h", marker=marker, showlegend=False,
                         hovertemplate="%{y}<br>" + LABELS[measure] + " %{x:.4f}<extra></extra>"), row=1, col=1)
    custom = np.dstack([ranges, profile[..., None]])  # (tensors, bins, 3)
    fig.add_trace(go.Heatmap(
        z=profile, x=(np.arange(bins) + 0.5) / bins * 100, y=names, customdata=custom, colorscale=scale,
        zmin=_first(zmin, lo, _nanmin(profile)), zmax=_first(zmax, hi, _nanmax(profile)),
        zmid=mid if zmin is None and zmax is None else None,
        colorbar={"title": {"text": LABELS[measure]}},
        hovertemplate="%{y}<br>rows %{customdata[0]:.0f}–%{customdata[1]:.0f}<br>" + LABELS[measure]
                      + " %{customdata[2]:.4f}<extra></extra>"), row=1, col=2)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_xaxes(title_text=LABELS[measure], row=1, col=1)
    fig.update_xaxes(title_text="position along the rows (%)", row=1, col=2)
    fig.update_layout(title={"text": html.escape(f"{report.b} vs {report.a}")}, height=120 + 26 * len(tensors),
                      margin={"l": 20, "r": 20, "t": 80, "b": 50})
    return fig


def page_range(report: SimilarityReport, measure: Measure) -> tuple[float, float]:
    """One colour range for every figure of a page, spanning the blocks it shows, so differences show: a
    fine-tune's cosines all sit near 1 and would be one colour on the natural [-1, 1]. ``rel_diff`` starts
    at 0 (unchanged)."""
    measure = check_measure(measure)
    values = [measures_from_sums(t.sums)[measure] for t in report.tensors]
    finite = np.concatenate([np.asarray(v, dtype=np.float64).ravel() for v in values]) if values else np.zeros(0)
    finite = finite[np.isfinite(finite)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if measure == "rel_diff":
        lo = 0.0
    if hi - lo < 1e-6:  # all equal: a visible range around the value
        lo, hi = lo - 0.5e-3, hi + 0.5e-3
    return lo, hi


def report_page(report: SimilarityReport, *, measure: Measure = "rel_diff") -> str:
    """A self-contained HTML page: the summary table, the overview and every tensor's heatmap, all coloured by
    ``measure`` on one range spanning the page's blocks (:func:`page_range`), stated above the figures.

    plotly.js is inlined once (first figure), so the page opens offline from disk."""
    measure = check_measure(measure)
    lo, hi = page_range(report, measure)
    figures = [overview(report, measure=measure, zmin=lo, zmax=hi)]
    figures += [heatmap(t, measure=measure, zmin=lo, zmax=hi) for t in report.tensors]
    meaning = {"rel_diff": "0 means unchanged", "cosine": "1 means the same direction, 0 unrelated",
               "norm_ratio": "1 means equal norms"}[measure]
    legend = (f'<p class="colour">Colour: {html.escape(LABELS[measure])} ({meaning}), from {lo:.4g} to {hi:.4g}: '
              "the range of the blocks on this page, the same in every figure.</p>")
    return standalone_page(f"eaglekit similarity: {report.b} vs {report.a}", before=[report._repr_html_(), legend],
                           figures=figures)


def save_page(report: SimilarityReport, path, *, measure: Measure = "rel_diff") -> None:
    """Write :func:`report_page` to ``path``."""
    write_page(report_page(report, measure=measure), path)


def _first(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)


def _nanmin(z: np.ndarray) -> float | None:
    finite = np.asarray(z)[np.isfinite(z)]
    return float(finite.min()) if finite.size else None


def _nanmax(z: np.ndarray) -> float | None:
    finite = np.asarray(z)[np.isfinite(z)]
    return float(finite.max()) if finite.size else None


__all__ = ["SCALES", "heatmap", "overview", "page_range", "report_page", "save_page"]
