"""Plotly figures of measured accept lengths (:class:`~eaglekit.analysis.acceptance.measure.AcceptanceResult`).

Each function takes one result or a ``{label: result}`` mapping, so drafters compare on one figure.
plotly is imported inside each function.
"""

from __future__ import annotations

import math

from collections.abc import Mapping
from typing import Union

from eaglekit.analysis.acceptance.measure import AcceptanceResult
from eaglekit.core.speedup.specmath import Scenario
from eaglekit.core.uncertainty import verdict

Results = Union[AcceptanceResult, Mapping[str, AcceptanceResult]]
#: one colour per drafter, in the same order on every figure (plotly's default qualitative palette)
COLOURS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880")


def _named(results: Results) -> dict[str, AcceptanceResult]:
    if isinstance(results, AcceptanceResult):
        return {results.drafter: results}
    return dict(results)


def break_even_by_steps(scenario: Scenario, steps: int) -> tuple[float, ...]:
    """Break-even accept length at K = 1..``steps``: each draft step lengthens the cycle (and, with a verify
    that grows per drafted token, the verify too), so break-even rises with K (cycle x baseline tok/s / 1000)."""
    return tuple(scenario.at_steps(k).break_even_accept_length for k in range(1, steps + 1))


def accept_length_vs_steps(results: Results, *, scenario: Scenario | None = None, trained_steps: int | None = None):
    """Accept length for every K from 1 to K_max (one line per drafter); the ceiling K + 1 dotted; with a
    serving ``scenario``, the break-even accept length AT EACH K (a marker per K: it rises with K, so a
    drafter pays at K where its line is above that K's marker); ``trained_steps``: a vertical line where
    the drafters' training-time test ended (beyond it they draft steps they never learned)."""
    import plotly.graph_objects as go

    named = _named(results)
    fig = go.Figure()
    kmax = max(r.steps for r in named.values())
    ks = list(range(1, kmax + 1))
    fig.add_trace(go.Scatter(x=ks, y=[k + 1 for k in ks], mode="lines", name="ceiling K + 1",
                             line={"dash": "dot", "color": "#98a2b3"}))
    if scenario is not None:
        fig.add_trace(go.Scatter(x=ks, y=list(break_even_by_steps(scenario, kmax)), mode="lines+markers",
                                 name="break-even at K", line={"dash": "dash", "color": "#d92d20"},
                                 marker={"symbol": "line-ew-open", "size": 18, "color": "#d92d20"},
                                 hovertemplate="K = %{x}<br>break-even %{y:.2f}<extra></extra>"))
    for i, (label, r) in enumerate(named.items()):
        spans = [r.interval_at(k) for k in range(1, r.steps + 1)]
        error = None
        if all(e.has_interval for e in spans):  # the 95% interval of each K's accept length, as error bars
            error = {"type": "data", "symmetric": False, "array": [e.high - e.value for e in spans],
                     "arrayminus": [e.value - e.low for e in spans], "thickness": 1}
        fig.add_trace(go.Scatter(x=list(range(1, r.steps + 1)), y=list(r.accept_length_by_steps), error_y=error,
                                 mode="lines+markers", name=label, line={"color": COLOURS[i % len(COLOURS)]},
                                 hovertemplate="K = %{x}<br>accept length %{y:.3f}<extra>" + label + "</extra>"))
    if trained_steps is not None and trained_steps < kmax:
        fig.add_vline(x=trained_steps + 0.5, line={"dash": "dot", "color": "#667085"},
                      annotation_text=f"trained for {trained_steps} steps", annotation_position="top left")
    fig.update_layout(title="Accept length vs draft steps K (bonus token counted)", xaxis_title="draft steps K",
                      yaxis_title="accept length", template="plotly_white", height=380, xaxis={"dtick": 1})
    return fig


def steps_table(results: Results, scenario: Scenario):
    """A table (pandas) of the accept length at every K, with its 95% interval, beside that K's break-even,
    and who pays there: GO when the whole interval is above break-even, TOO CLOSE TO CALL when it straddles
    (:func:`eaglekit.core.uncertainty.verdict`): the chart of :func:`accept_length_vs_steps` in numbers."""
    import pandas as pd

    named = _named(results)
    kmax = max(r.steps for r in named.values())
    be = break_even_by_steps(scenario, kmax)
    rows = []
    for k in range(1, kmax + 1):
        row: dict[str, object] = {"K": k, "break-even": round(be[k - 1], 3)}
        calls: dict[str, str] = {}
        for label, r in named.items():
            if k <= r.steps:
                row[label] = r.interval_at(k).text(3)
                calls[label] = verdict(r.interval_at(k), be[k - 1])
            else:
                row[label] = None
        row["pays at this K"] = _payers([label for label, c in calls.items() if c == "GO"], list(named))
        close = [label for label, c in calls.items() if c == "TOO CLOSE TO CALL"]
        row["too close to call"] = ", ".join(close) if close else "none"
        rows.append(row)
    return pd.DataFrame(rows).set_index("K")


def _payers(pay: list[str], every: list[str]) -> str:
    """Who pays at one K, short enough for a table cell: "none", "all", "all but X" or the names."""
    if not pay:
        return "none"
    if len(every) >= 3 and len(pay) > len(every) / 2:
        rest = [label for label in every if label not in pay]
        return "all" if not rest else "all but " + ", ".join(rest)
    return ", ".join(pay)


def per_step_acceptance(results: Results):
    """P(step j accepted | steps 1..j-1 accepted), one group of bars per step."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (label, r) in enumerate(_named(results).items()):
        ys = [None if c is None else c for c in r.per_step_acceptance]
        fig.add_trace(go.Bar(x=[f"step {j}" for j in range(1, r.steps + 1)], y=ys, name=label,
                             marker={"color": COLOURS[i % len(COLOURS)]},
                             hovertemplate="%{x}: %{y:.3f}<extra>" + label + "</extra>"))
        if r.expected_acceptance is not None:
            fig.add_trace(go.Scatter(x=[f"step {j}" for j in range(1, r.steps + 1)], y=list(r.expected_acceptance),
                                     mode="markers", marker={"symbol": "diamond", "size": 10},
                                     name=f"{label}: expected at T = {r.temperature:g}"))
    fig.update_layout(title="Per-step conditional acceptance", yaxis_title="P(accept step j | 1..j-1)",
                      yaxis_range=[0, 1.05], barmode="group", template="plotly_white", height=380)
    return fig


def accept_length_by_position(profiles, *, log_x: bool | None = None):
    """Accept length against the context length at which each cycle starts (one
    :class:`~eaglekit.analysis.acceptance.positions.PositionProfile`, or ``{label: profile}``): each bucket at its
    cycles' mean position with its interval and its span as a horizontal bar; the break-even accept length dashed; the position
    from which the drafter stops paying, and the drafter's own range (trained length, max_position_embeddings, a
    YaRN range), as vertical lines. ``log_x``: a logarithmic position axis (None: where the buckets' middles span
    more than a factor of 20, as long traces beside chat-length requests do)."""
    import plotly.graph_objects as go

    from eaglekit.analysis.acceptance.positions import PositionProfile

    named = {"drafter": profiles} if isinstance(profiles, PositionProfile) else dict(profiles)
    mids = [b.mean_position if b.mean_position is not None else (b.start + b.end - 1) / 2
            for p in named.values() for b in p.buckets]
    if log_x is None:
        log_x = bool(mids) and max(mids) > 20 * max(min(mids), 1)
    fig = go.Figure()
    lines: dict[str, int] = {}
    for i, (label, prof) in enumerate(named.items()):
        bs = prof.buckets
        # each bucket at the mean position of its cycles (its middle where that was not kept), its span as a bar
        mid = [b.mean_position if b.mean_position is not None else (b.start + b.end - 1) / 2 for b in bs]
        ys = [b.accept_length.value for b in bs]
        fig.add_trace(go.Scatter(
            x=mid, y=ys, mode="lines+markers", name=label, marker={"color": COLOURS[i % len(COLOURS)]},
            error_x={"type": "data", "symmetric": False, "array": [b.end - 1 - m for b, m in zip(bs, mid)],
                     "arrayminus": [m - (max(b.start, 1) if log_x else b.start) for b, m in zip(bs, mid)],
                     "thickness": 1, "width": 0},
            error_y={"type": "data", "symmetric": False,
                     "array": [(b.accept_length.high if b.accept_length.has_interval else b.accept_length.value) - y
                               for b, y in zip(bs, ys)],
                     "arrayminus": [y - (b.accept_length.low if b.accept_length.has_interval else y)
                                    for b, y in zip(bs, ys)]},
            customdata=[[b.label(), b.accept_length.text(), b.cycles, b.verdict or ""] for b in bs],
            hovertemplate="positions %{customdata[0]}: %{customdata[1]} over %{customdata[2]} cycles "
                          "%{customdata[3]}<extra>" + label + "</extra>"))
        if prof.break_even is not None:
            fig.add_hline(y=prof.break_even, line_dash="dash", line_color=COLOURS[i % len(COLOURS)],
                          annotation_text=f"break-even {prof.break_even:.2f}")
        if prof.stops_paying_at is not None:
            lines[f"{label} stops paying"] = prof.stops_paying_at
        lines.update({name: at for name, at in prof.drafter_range.lines()})
    for name, at in lines.items():   # a shape takes the position, an annotation on a log axis its logarithm
        fig.add_vline(x=at, line_dash="dot", line_color="#888")
        fig.add_annotation(x=math.log10(max(at, 1)) if log_x else at, y=1, yref="paper", text=f"{name} {at}",
                           textangle=-90, showarrow=False, xanchor="left", yanchor="top", font={"size": 11})
    fig.update_layout(title="Accept length by context position", xaxis_title="context length at the cycle's start"
                      + (" (log scale)" if log_x else ""), xaxis_type="log" if log_x else "linear",
                      yaxis_title="accept length (bonus included)", template="plotly_white", height=400)
    return fig


def per_prompt_spread(results: Results):
    """Each prompt's accept length, as a box with every point, one box per drafter."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, (label, r) in enumerate(_named(results).items()):
        ys = [v for v in r.per_prompt_accept_length if v is not None]
        fig.add_trace(go.Box(y=ys, name=label, boxpoints="all", jitter=0.4, pointpos=0,
                             marker={"color": COLOURS[i % len(COLOURS)]},
                             hovertemplate="accept length %{y:.3f}<extra>" + label + "</extra>"))
    fig.update_layout(title="Accept length per prompt", yaxis_title="accept length", template="plotly_white",
                      height=380, showlegend=False)
    return fig


def accept_length_curve(curves, *, break_even: float | None = None, up_to: float | None = None, points: int = 60):
    """Accept length against training samples (log axis), one colour per curve: each checkpoint with its
    interval over prompts, the fitted curve (solid over the measured range, dotted beyond it) and its 95%
    band from the bootstrap; ``break_even``: a horizontal line at that accept length (default: the first
    break-even the curves were joined to). ``up_to``: extend the curves to this many samples (default: the
    largest prediction asked for, else 8x the largest checkpoint).

    ``curves``: an :class:`~eaglekit.analysis.acceptance.curve.AcceptanceCurve`, one curve, or a sequence of them."""
    import numpy as np
    import plotly.graph_objects as go

    series = list(getattr(curves, "curves", None) or (curves if isinstance(curves, (list, tuple)) else [curves]))
    fig = go.Figure()
    top = max(max(c.samples) for c in series)
    asked = [n for c in series for n, _ in c.predictions]
    end = float(up_to or max(asked + [8 * top]))
    for i, c in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        pts = c.checkpoints
        lows = [p.accept_length.low for p in pts]
        highs = [p.accept_length.high for p in pts]
        err = None
        if all(v is not None for v in lows + highs):
            err = {"type": "data", "symmetric": False, "array": [h - p.accept_length.value for h, p in zip(highs, pts)],
                   "arrayminus": [p.accept_length.value - lo for lo, p in zip(lows, pts)], "color": colour}
        fig.add_trace(go.Scatter(x=[p.samples for p in pts], y=[p.accept_length.value for p in pts], mode="markers",
                                 name=f"{c.label}: checkpoints", marker={"color": colour, "size": 9}, error_y=err,
                                 hovertemplate="%{x:,.0f} samples<br>accept length %{y:.3f}<extra>" + c.label + "</extra>"))
        if c.fit is None:
            continue
        xs = np.geomspace(min(c.samples) / 2, max(end, max(c.samples)), points)
        band = [c.fit.predict(float(x)) for x in xs]
        lo = [b.low if b.low is not None else b.value for b in band]
        hi = [b.high if b.high is not None else b.value for b in band]
        fig.add_trace(go.Scatter(x=list(xs) + list(xs[::-1]), y=hi + lo[::-1], fill="toself", fillcolor=_tint(colour),
                                 line={"width": 0}, hoverinfo="skip", name=f"{c.label}: 95% band", showlegend=True))
        inside = xs <= max(c.samples)
        for mask, dash, what in ((inside, "solid", "fit"), (xs >= max(c.samples) / 1.0001, "dot", "extrapolated")):
            fig.add_trace(go.Scatter(x=list(xs[mask]), y=[b.value for b, m in zip(band, mask) if m], mode="lines",
                                     name=f"{c.label}: {what}", line={"color": colour, "dash": dash},
                                     hovertemplate="%{x:,.0f} samples<br>fit %{y:.3f}<extra>" + c.label + "</extra>"))
    if break_even is None:
        lines = [p for c in series for p in c.plan]
        break_even = lines[0].break_even if lines else None
    if break_even is not None:
        fig.add_hline(y=break_even, line={"dash": "dash", "color": "#d92d20"},
                      annotation_text=f"break-even {break_even:.2f}", annotation_position="bottom right")
    steps = max(c.steps for c in series)
    lo_x = min(min(c.samples) for c in series) / 2
    hi_x = max(end, top)
    ticks = _doubling_ticks(lo_x, hi_x)
    fig.update_layout(title=f"Accept length vs training samples (K = {steps}; bands: the plausible curve forms' "
                            "bootstrap over checkpoints and prompts)", yaxis_title="accept length",
                      xaxis={"type": "log", "title": {"text": "samples seen (log)"}, "tickmode": "array",
                             "tickvals": ticks, "ticktext": [_samples_label(t) for t in ticks]},
                      template="plotly_white", height=420)
    return fig


def _doubling_ticks(low: float, high: float, most: int = 9) -> list[float]:
    """Tick values on a log axis from ``low`` to ``high``: powers of two, every other one (or sparser) when more
    than ``most`` would fit, so the labels never crowd (plotly's own log ticks label 2 and 5 of every decade)."""
    import math

    first, last = math.ceil(math.log2(max(low, 1e-9))), math.floor(math.log2(max(high, 1e-9)))
    exps = list(range(first, last + 1))
    step = max(1, math.ceil(len(exps) / most))
    return [2.0 ** e for e in exps[::step]]


def _samples_label(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:g}M"
    if n >= 1e4:
        return f"{n / 1e3:g}K"
    return f"{n:,.0f}" if n >= 1 else f"{n:g}"


def _tint(colour: str) -> str:
    r, g, b = (int(colour[k:k + 2], 16) for k in (1, 3, 5))
    return f"rgba({r},{g},{b},0.15)"
