"""The accept-length calculator: an ipywidgets app and a static plotly what-if for rendered notebooks.

:class:`Calculator` (needs a kernel) has sliders for the scenario and live readouts; its chart is a
plotly ``FigureWidget`` updated in place. :func:`whatif_figure` (needs no kernel) precomputes the
same chart for a grid of accept lengths and moves the current point with plotly's own slider, so a
notebook rendered to HTML keeps a working what-if. Both draw from :func:`chart_traces`, and all
arithmetic comes from :mod:`eaglekit.specmath`. plotly and ipywidgets are imported where used.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.specmath import Estimate, Scenario, cycle_ms, estimate, throughput

__all__ = ["Calculator", "chart_traces", "throughput_figure", "whatif_figure"]

#: Chains drawn for comparison: each line ends at its ceiling k + 1 tokens per cycle.
K_CURVES = (1, 2, 3, 4, 6, 8)
#: Named scenarios for :meth:`Calculator.preset`: scenario, accept length, target tok/s.
PRESETS: dict[str, tuple[Scenario, float, float]] = {"seed": (Scenario.seed(), 2.0, 150.0)}
_CURRENT, _NEEDED = "current", "needed for target"
_UNBOUNDED_TOP = 8.0  # where the x axis and the what-if grid stop for an unbounded chain


def _x_max(est: Estimate, k_curves: Sequence[int]) -> float:
    k = est.scenario.steps
    ends = [est.accept_length, k + 1 if k else _UNBOUNDED_TOP, *(j + 1 for j in k_curves)]
    if est.target is not None and est.target.alpha is not None:
        ends.append(est.target.accept_length)
    return max(ends) + 0.5


def chart_traces(est: Estimate, *, k_curves: Sequence[int] = K_CURVES, x_max: float | None = None) -> list[dict]:
    """Data for the throughput-vs-accept-length chart, one dict per trace, always in the same order.

    Traces: baseline, break-even, target, the scenario's own chain, one line per k in ``k_curves``
    (cycle = verify + k x draft + overhead, ending at its ceiling k + 1; one legend entry, each named
    in its hover text), the current point, and the accept length the target needs. A trace with
    nothing to show gets empty x and y, so the order never moves.
    """
    s, x_max = est.scenario, x_max or _x_max(est, k_curves)
    b, be = s.baseline_tps, est.break_even_accept_length
    traces = [
        {"name": f"baseline {b:g} tok/s", "x": [1.0, x_max], "y": [b, b]},
        {"name": f"break-even L = {be:.2f}", "x": [be, be], "y": [0.0, b]},
    ]
    t = est.target
    traces.append({"name": f"target {t.tokens_per_s:g} tok/s", "x": [1.0, x_max], "y": [t.tokens_per_s] * 2}
                  if t else {"name": "target", "x": [], "y": []})
    end = x_max if s.steps is None else s.steps + 1.0
    own = "unbounded chain" if s.steps is None else f"k = {s.steps}"
    traces.append({"name": f"this scenario ({own}, {est.cycle_ms:.1f} ms)", "x": [1.0, end],
                   "y": [throughput(1.0, cycle_ms=est.cycle_ms), throughput(end, cycle_ms=est.cycle_ms)]})
    others = "other chains: k = " + ", ".join(str(j) for j in k_curves)  # one legend entry for all
    for j in k_curves:
        cycle = cycle_ms(s.verify_ms, draft_ms=s.draft_ms, steps=j, overhead_ms=s.overhead_ms)
        traces.append({"name": others, "x": [1.0, j + 1.0],
                       "y": [throughput(1.0, cycle_ms=cycle), throughput(j + 1.0, cycle_ms=cycle)],
                       "hovertemplate": f"k = {j}, cycle {cycle:.1f} ms<br>%{{x:.2f}} tokens/cycle: "
                                        "%{y:.1f} tok/s<extra></extra>"})
    traces.append({"name": _CURRENT, "x": [est.accept_length], "y": [est.tokens_per_s]})
    reachable = t is not None and t.alpha is not None
    traces.append({"name": _NEEDED, "x": [max(t.accept_length, 1.0)] if reachable else [],
                   "y": [t.tokens_per_s] if reachable else []})
    return traces


_ORANGES = ("#fdae6b", "#fd8d3c", "#f16913", "#d94801", "#a63603", "#7f2704")


def _styles(k_curves: Sequence[int]) -> list[dict]:
    return [
        {"mode": "lines", "line": {"color": "black", "dash": "dash"}},
        {"mode": "lines", "line": {"color": "crimson", "dash": "dot"}},
        {"mode": "lines", "line": {"color": "seagreen", "dash": "dot"}},
        {"mode": "lines", "line": {"color": "royalblue", "width": 4}},
        *({"mode": "lines+markers", "line": {"color": _ORANGES[i % len(_ORANGES)], "width": 1.5},
           "marker": {"size": [0, 8], "color": _ORANGES[i % len(_ORANGES)]}, "legendgroup": "k", "showlegend": i == 0}
          for i in range(len(k_curves))),
        {"mode": "markers", "marker": {"color": "royalblue", "size": 14, "line": {"color": "white", "width": 2}}},
        {"mode": "markers", "marker": {"color": "seagreen", "size": 12, "symbol": "diamond"}},
    ]


def _readout(est: Estimate) -> str:
    return (f"accept length {est.accept_length:.2f} (alpha {est.alpha:.2f}): <b>{est.tokens_per_s:.1f} tok/s</b>, "
            f"{est.speedup:.2f}x baseline; break-even {est.break_even_accept_length:.2f}")


def throughput_figure(est: Estimate, *, k_curves: Sequence[int] = K_CURVES, widget: bool = False) -> Any:
    """A plotly figure of throughput against accept length for one :class:`Estimate`.

    ``widget=True`` returns a ``go.FigureWidget`` (for :class:`Calculator`); otherwise a ``go.Figure``.
    """
    import plotly.graph_objects as go

    x_max = _x_max(est, k_curves)
    data = [go.Scatter(**trace, **style) for trace, style in zip(chart_traces(est, k_curves=k_curves, x_max=x_max),
                                                                   _styles(k_curves))]
    figure = (go.FigureWidget if widget else go.Figure)(data=data)
    figure.update_layout(
        title="Throughput against accept length (bonus token included)",
        xaxis={"title": "accept length (tokens per cycle)", "range": [1.0, x_max]},
        yaxis={"title": "tokens per second", "rangemode": "tozero"},
        annotations=[{"text": _readout(est), "xref": "paper", "yref": "paper", "x": 0.0, "y": 1.0,
                      "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": {"size": 14}}],
        height=460, margin={"t": 80},
    )
    return figure


def whatif_figure(
    scenario: Scenario,
    *,
    accept_length: float = 2.0,
    accept_lengths: Sequence[float] | None = None,
    target_tps: float | None = None,
    k_curves: Sequence[int] = K_CURVES,
) -> Any:
    """A ``go.Figure`` whose own slider moves the current point along accept length, no kernel needed.

    Each slider step is a precomputed plotly ``update``: it sets the current point's x/y and the readout
    annotation (throughput, speedup). ``accept_lengths`` defaults to 1.0 to the chain's ceiling (8 for
    an unbounded chain) in steps of 0.1; the slider starts at the grid value nearest ``accept_length``.
    """
    est = estimate(scenario, accept_length=accept_length, target_tps=target_tps)
    figure = throughput_figure(est, k_curves=k_curves)
    if accept_lengths is None:
        top = _UNBOUNDED_TOP if scenario.steps is None else scenario.steps + 1.0
        accept_lengths = [1.0 + i / 10 for i in range(round((top - 1.0) * 10) + 1)]
    if not accept_lengths:
        raise InputError("accept_lengths is empty: give at least one accept length for the slider")
    point = next(i for i, trace in enumerate(figure.data) if trace.name == _CURRENT)
    steps = []
    for L in accept_lengths:
        at = estimate(scenario, accept_length=L, target_tps=target_tps)
        steps.append({
            "label": f"{L:.1f}",
            "method": "update",
            "args": [{"x": [[at.accept_length]], "y": [[at.tokens_per_s]]}, {"annotations[0].text": _readout(at)},
                     [point]],
        })
    active = min(range(len(accept_lengths)), key=lambda i: abs(accept_lengths[i] - accept_length))
    figure.update_layout(
        sliders=[{"active": active, "steps": steps, "currentvalue": {"prefix": "accept length "},
                  "pad": {"t": 50}}],
        height=560,
    )
    first_data, first_layout, _ = steps[active]["args"]
    figure.update_traces(x=first_data["x"][0], y=first_data["y"][0], selector={"name": _CURRENT})
    figure.layout.annotations[0].text = first_layout["annotations[0].text"]
    return figure


class Calculator:
    """Sliders for a speculative-decoding scenario, live readouts and a chart; last line of a cell shows it.

    ``controls`` maps names to the widgets (``baseline_tps``, ``verify_ms``, ``draft_ms``, ``steps``,
    ``unbounded``, ``overhead_ms``, ``mode`` ("accept_length" or "alpha"), ``accept_length``,
    ``alpha``, ``target_tps``); ``readouts`` holds the current numbers, ``estimate`` the record and
    ``readout`` the HTML widget showing it.
    Setting a control's ``value`` from Python updates both, and the chart's traces in place.
    """

    def __init__(self, scenario: Scenario | None = None, *, accept_length: float = 2.0, target_tps: float = 150.0):
        import ipywidgets as w

        def slider(cls: Any, label: str, lo: float, hi: float, step: float, **kw: Any) -> Any:
            return cls(description=label, min=lo, max=hi, step=step, continuous_update=True,
                       style={"description_width": "150px"}, layout={"width": "430px"}, **kw)

        self.controls: dict[str, Any] = {
            "baseline_tps": slider(w.FloatSlider, "baseline tok/s", 1, 400, 1),
            "verify_ms": slider(w.FloatSlider, "verify ms / cycle", 1, 200, 0.5),
            "draft_ms": slider(w.FloatSlider, "draft ms / step", 0, 20, 0.1),
            "steps": slider(w.IntSlider, "draft steps k", 1, 10, 1),
            "unbounded": w.Checkbox(description="unbounded chain (no k, no draft cost)", indent=False),
            "overhead_ms": slider(w.FloatSlider, "overhead ms / cycle", 0, 50, 0.5),
            "mode": w.ToggleButtons(options=[("accept length", "accept_length"), ("alpha", "alpha")]),
            "accept_length": slider(w.FloatSlider, "accept length", 1, 11, 0.01),
            "alpha": slider(w.FloatSlider, "alpha (per token)", 0, 0.95, 0.01),
            "target_tps": slider(w.FloatSlider, "target tok/s", 1, 600, 1),
        }
        self.readouts: dict[str, float | None] = {}
        self.estimate: Estimate | None = None
        self.readout = w.HTML()
        self._busy = False
        self._figure: Any = None
        self.apply(scenario or Scenario.seed(), accept_length=accept_length, target_tps=target_tps)
        self._figure = throughput_figure(self.estimate, widget=True)  # type: ignore[arg-type]
        for control in self.controls.values():
            control.observe(lambda _change: self.update(), names="value")
        self.widget = w.VBox([w.HBox([w.VBox(list(self.controls.values())), self.readout]), self._figure])

    @classmethod
    def preset(cls, name: str = "seed") -> Calculator:
        """A calculator loaded with a named scenario from :data:`PRESETS` ("seed": 82 tok/s, 30 ms, L 2.0)."""
        if name not in PRESETS:
            raise InputError(f"unknown preset {name!r}: choose one of {sorted(PRESETS)}")
        scenario, accept_length, target_tps = PRESETS[name]
        return cls(scenario, accept_length=accept_length, target_tps=target_tps)

    @property
    def figure(self) -> Any:
        """The plotly ``FigureWidget`` (traces as in :func:`chart_traces`)."""
        return self._figure

    def apply(self, scenario: Scenario, *, accept_length: float, target_tps: float) -> None:
        """Set every control from ``scenario`` at once, then update once."""
        c, self._busy = self.controls, True
        try:
            c["unbounded"].value = scenario.steps is None
            c["steps"].value = scenario.steps or 2
            for name in ("baseline_tps", "verify_ms", "draft_ms", "overhead_ms", "target_tps"):
                value = target_tps if name == "target_tps" else getattr(scenario, name)
                c[name].max = max(c[name].max, value)
                c[name].value = value
            c["mode"].value = "accept_length"
            c["accept_length"].max = 11.0
            c["accept_length"].value = accept_length
        finally:
            self._busy = False
        self.update()

    def _scenario(self) -> Scenario:
        c = self.controls
        unbounded = c["unbounded"].value
        c["draft_ms"].disabled = c["steps"].disabled = unbounded
        c["accept_length"].max = 11.0 if unbounded else c["steps"].value + 1.0  # clamps the value
        return Scenario(
            baseline_tps=c["baseline_tps"].value,
            verify_ms=c["verify_ms"].value,
            draft_ms=0.0 if unbounded else c["draft_ms"].value,
            steps=None if unbounded else c["steps"].value,
            overhead_ms=c["overhead_ms"].value,
        )

    def update(self) -> None:
        """Recompute from the controls; refresh readouts and the chart (traces updated in place)."""
        if self._busy:
            return
        c, self._busy = self.controls, True
        try:
            by_alpha = c["mode"].value == "alpha"
            c["alpha"].layout.display = None if by_alpha else "none"
            c["accept_length"].layout.display = "none" if by_alpha else None
            scenario = self._scenario()
            value = {"alpha": c["alpha"].value} if by_alpha else {"accept_length": c["accept_length"].value}
            est = estimate(scenario, target_tps=c["target_tps"].value, **value)
            if by_alpha:
                c["accept_length"].value = est.accept_length
            else:
                c["alpha"].value = min(est.alpha, c["alpha"].max)
        except InputError as e:
            self.readout.value = f"<p style='color:crimson'>{escape(str(e))}</p>"
            return
        finally:
            self._busy = False
        self.estimate = est
        t = est.target
        self.readouts = {
            "cycle_ms": est.cycle_ms,
            "tokens_per_s": est.tokens_per_s,
            "speedup": est.speedup,
            "break_even_accept_length": est.break_even_accept_length,
            "accept_length": est.accept_length,
            "alpha": est.alpha,
            "target_accept_length": t.accept_length if t else None,
            "target_alpha": t.alpha if t else None,
        }
        self.readout.value = est._repr_html_()
        if self._figure is not None:
            self._redraw(est)

    def _redraw(self, est: Estimate) -> None:
        x_max = _x_max(est, K_CURVES)
        traces = chart_traces(est, x_max=x_max)
        with self._figure.batch_update():
            for trace, new in zip(self._figure.data, traces):
                trace.update(new)
            self._figure.layout.xaxis.range = [1.0, x_max]
            self._figure.layout.annotations[0].text = _readout(est)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
