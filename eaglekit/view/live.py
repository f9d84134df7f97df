"""After the deploy, drawn: successive live readings beside the offline figure, and a widget that reads again.

:func:`live_readings_figure` is static (a plotly figure: each window's accept length with its 95% interval, the
offline figure as a band), so a rendered report shows the readings without a kernel. :class:`LiveWidget` reads the
server again at the press of a button; its effect runs in Python, so the report leaves it out (with a note, see
:func:`eaglekit.view.report.static_widgets`) and it works where a kernel runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from eaglekit.analysis.live.compare import compare_live, offline_at
from eaglekit.analysis.live.read import LiveSeries, read_live
from eaglekit.core.errors import EaglekitError

__all__ = ["LiveWidget", "live_readings_figure"]


def _offline_json(offline: Any) -> Mapping[str, Any] | None:
    """An ``eaglekit acceptance --json`` result, from the record itself (``AcceptanceResult``) or its JSON."""
    if offline is None:
        return None
    return offline.to_json() if hasattr(offline, "to_json") else offline


def live_readings_figure(series: LiveSeries, *, offline: Any = None):
    """Accept length per live window with its 95% interval (error bars); the offline figure at the served steps
    as a line with its interval as a band."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xs = list(range(1, len(series.readings) + 1))
    spans = [r.accept_length for r in series.readings]
    error = None
    if all(s.has_interval for s in spans):
        error = {"type": "data", "symmetric": False, "array": [s.high - s.value for s in spans],
                 "arrayminus": [s.value - s.low for s in spans], "thickness": 1}
    off = _offline_json(offline)
    if off is not None:
        o, at = offline_at(off, series.latest.steps)
        label = f"offline ({'K = ' + str(at) if at else 'its own K'})"
        if o.has_interval:
            fig.add_trace(go.Scatter(x=[0.5, len(xs) + 0.5, len(xs) + 0.5, 0.5], y=[o.low, o.low, o.high, o.high],
                                     fill="toself", mode="none", fillcolor="rgba(46, 144, 250, 0.15)",
                                     name="offline 95% interval", hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=[0.5, len(xs) + 0.5], y=[o.value, o.value], mode="lines", name=label,
                                 line={"color": "#175cd3", "dash": "dash"}))
    fig.add_trace(go.Scatter(x=xs, y=[s.value for s in spans], error_y=error, mode="lines+markers",
                             name=f"engine ({series.latest.engine})", line={"color": "#d92d20"},
                             hovertemplate="window %{x}<br>accept length %{y:.3f}<extra></extra>"))
    fig.update_layout(title="The engine's accept length, window by window, beside the offline figure",
                      xaxis_title="live window", yaxis_title="accept length (1 + accepted / drafts)",
                      template="plotly_white", height=360, xaxis={"dtick": 1})
    return fig


class LiveWidget:
    """A button that reads the server again (one window) and shows the reading beside the offline figure.

    ``LiveWidget(url, offline=result, window=10)``; displayed as the last line of a cell. Needs a running kernel.
    ``name``: what the readings call the server (default: its address)."""

    def __init__(self, url: str, *, offline: Any = None, window: float = 10.0, model: str | None = None,
                 timeout: float | None = None, name: str | None = None) -> None:
        import ipywidgets as w  # only when a widget is made

        self.url, self.window, self.model, self.timeout, self.name = url, window, model, timeout, name
        self.offline = _offline_json(offline)
        if self.offline is not None:
            offline_at(self.offline, None)  # a bad offline result is refused now, not at the first press
        self.button = w.Button(description=f"Read again ({window:g} s)", icon="refresh")
        self.output = w.HTML("<p><em>Press to read the engine's counters over one window.</em></p>")
        self.button.on_click(lambda _: self.refresh())
        self.box = w.VBox([self.button, self.output])
        self.last = None

    def refresh(self) -> None:
        """One window's reading, shown beside the offline figure (an error is shown in its place)."""
        self.button.disabled = True
        try:
            reading = read_live(self.url, window=self.window, model=self.model, timeout=self.timeout, name=self.name)
            self.last = compare_live(reading, self.offline) if self.offline is not None else reading
            self.output.value = self.last._repr_html_()
        except EaglekitError as e:
            self.output.value = f"<p style='color:#b42318'>{escape(str(e))}</p>"
        finally:
            self.button.disabled = False

    def _repr_mimebundle_(self, **kwargs):
        return self.box._repr_mimebundle_(**kwargs)
