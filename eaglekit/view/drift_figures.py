"""Plotly figures of target drift: the per-layer map and the aux layers a drafter reads.

Built from a :class:`~eaglekit.analysis.drift.report.DriftReport`; the analysis never imports this module.
"""

from __future__ import annotations

import html
import math
import textwrap
from typing import TYPE_CHECKING, Literal

import numpy as np
from eaglekit.view.page import standalone_page, write_page
from eaglekit.core.errors import InputError

if TYPE_CHECKING:
    from eaglekit.analysis.drift.report import DriftReport

DriftMeasure = Literal["relative", "cosine"]
_LABELS = {"relative": "‖b−a‖/‖a‖", "cosine": "cosine"}
#: Characters a subtitle line holds before it wraps (a notebook's figure is about 700 px wide).
SUBTITLE_WIDTH = 80
#: Layer ticks at most on the drift map's x axis (every layer up to this many layers).
MAX_TICKS = 20


def drift_map(report: DriftReport, *, measure: DriftMeasure = "relative"):
    """Layers (x) by component (y), coloured by ``measure``; hovering a cell shows both measures with
    their intervals. The drafter's aux layers (as SGLang and vLLM read them) are marked on the x axis."""
    import plotly.graph_objects as go

    if measure not in _LABELS:

        raise InputError(f"measure must be 'relative' or 'cosine', got {measure!r}.")
    cells = [f for f in report.strata if f.layer is not None]
    layers = sorted({f.layer for f in cells})
    comps = sorted({f.component for f in cells}, key=_component_order)
    col, row = {l: i for i, l in enumerate(layers)}, {c: i for i, c in enumerate(comps)}
    z = np.full((len(comps), len(layers)), np.nan)
    text = np.full(z.shape, "", dtype=object)
    for f in cells:
        est = getattr(f, measure)
        z[row[f.component], col[f.layer]] = est.value
        text[row[f.component], col[f.layer]] = (
            f"{f.name}<br>cosine {_ci(f.cosine)}<br>‖b−a‖/‖a‖ {_ci(f.relative)}<br>units {f.units}/{f.units_total}")
    scale = "Viridis" if measure == "relative" else "Viridis_r"
    fig = go.Figure(go.Heatmap(z=z, x=layers, y=comps, text=text, hovertemplate="%{text}<extra></extra>",
                               colorscale=scale, colorbar={"title": {"text": _LABELS[measure]}}))
    for feed in report.feeds:
        if feed.layer in col:
            fig.add_vline(x=feed.layer, line={"width": 1, "dash": "dot", "color": "#c11574"})
    engines: dict[int, list[str]] = {}  # layer -> the engine releases that read it
    for layer, engine in sorted({(f.layer, f.engine) for f in report.feeds}):
        engines.setdefault(layer, []).append(engine)
    note = "; ".join(("the token embeddings" if l < 0 else f"output of layer {l}") + f" ({', '.join(e)})"
                     for l, e in engines.items())
    lines = textwrap.wrap(f"dotted: layers feeding the drafter: {note}", SUBTITLE_WIDTH) if note else []
    step = max(1, math.ceil(len(layers) / MAX_TICKS))  # whole layers only: never a tick at -0.5 or 0.5
    fig.update_layout(
        title={"text": f"Drift map: {_LABELS[measure]} per layer and component"
                       + "".join(f"<br><sup>{html.escape(line)}</sup>" for line in lines),
               "yref": "container", "y": 1, "yanchor": "top", "pad": {"t": 16}},  # grows down into the margin
        xaxis={"title": {"text": "decoder layer"}, "tickmode": "array", "tickvals": layers[::step],
               "ticktext": [str(l) for l in layers[::step]]},
        yaxis={"title": {"text": ""}},
        height=180 + 40 * len(comps) + 22 * len(lines), margin={"l": 120, "r": 20, "t": 56 + 22 * len(lines), "b": 50})
    return fig


def drafter_view(report: DriftReport):
    """The drafter's view as bars with error bars: whole target, embedding, draft lm_head rows and each
    layer whose output feeds it (one bar per layer; its hover names the engine releases that feed it), by
    ``1 - cosine`` from zero (on a log axis where the figures span more than :data:`LOG_SPREAD`)."""
    import plotly.graph_objects as go

    figs = [report.whole, report.embedding, report.draft_lm_head]
    names = ["whole target", "embedding", "lm_head (draft rows)"]
    hover = ["", "the drafter's frozen copy", "the rows of its draft vocabulary"]
    readers: dict[int, list[str]] = {}  # one bar per layer fed, however many engine releases feed it
    for f in report.feeds:
        if f.own is not None:
            readers.setdefault(f.layer, []).append(f"{f.engine} (id {f.aux_id})")
    for layer, who in sorted(readers.items()):
        figs.append(next(f.own for f in report.feeds if f.layer == layer and f.own is not None))
        names.append(f"layer {layer} output")
        hover.append("fed by " + ", ".join(who))
    keep = [i for i, f in enumerate(figs) if f is not None and math.isfinite(f.cosine.value)]
    pairs = [(names[i], figs[i]) for i in keep]
    y = [max(1e-9, 1 - f.cosine.value) for _, f in pairs]
    hi = [max(0.0, (1 - f.cosine.low) - v) if math.isfinite(f.cosine.low) else 0.0 for (_, f), v in zip(pairs, y)]
    lo = [max(0.0, v - (1 - f.cosine.high)) if math.isfinite(f.cosine.high) else 0.0 for (_, f), v in zip(pairs, y)]
    fig = go.Figure(go.Bar(x=[n for n, _ in pairs], y=y, error_y={"type": "data", "array": hi, "arrayminus": lo},
                           text=[hover[i] for i in keep], hovertemplate="%{x}: 1 − cosine %{y:.4g}<br>%{text}"
                           "<extra></extra>", textposition="none", marker_color="#175cd3"))
    # bars are lengths from zero: a log axis (no zero) would cut them at an arbitrary floor, so it is used only
    # where the figures span more than a factor of 10 and a linear one would flatten the small ones to nothing
    spread = max(y) / min(y) if y else 1.0
    # one label a decade on a log axis (plotly's default labels 2 and 5 of each decade too, crowding the axis)
    axis = ({"type": "log", "title": {"text": "1 − cosine (log scale)"}, "dtick": 1, "exponentformat": "power"}
            if spread > LOG_SPREAD else
            {"type": "linear", "rangemode": "tozero", "title": {"text": "1 − cosine"}})
    fig.update_layout(title={"text": "Where the drafter looks: 1 − cosine (bars: interval)"},
                      yaxis=axis, height=380, margin={"l": 70, "r": 20, "t": 60, "b": 110})
    return fig


#: The ratio of the largest bar to the smallest past which the drafter's view takes a log axis.
LOG_SPREAD = 10.0


def drift_page(report: DriftReport) -> str:
    """A self-contained HTML page (plotly.js inlined once): the report's tables and both figures."""
    return standalone_page(f"eaglekit drift: {report.b} vs {report.a}",
                           figures=[drafter_view(report), drift_map(report)], after=[report._repr_html_()])


def save_drift_page(report: DriftReport, path) -> None:
    """Write :func:`drift_page` to ``path``."""
    write_page(drift_page(report), path)


def _ci(e) -> str:
    if not math.isfinite(e.value):
        return "n/a"
    if not math.isfinite(e.low) or e.low == e.high:
        return f"{e.value:.4f}"
    return f"{e.value:.4f} [{e.low:.4f}, {e.high:.4f}]"


def _component_order(c: str) -> tuple[int, str]:
    order = ["attention", "dense mlp", "shared experts", "routed experts", "router", "norms"]
    return (order.index(c) if c in order else len(order), c)


__all__ = ["drift_map", "drafter_view", "drift_page", "save_drift_page"]
