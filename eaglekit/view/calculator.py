"""The accept-length calculator: an anywidget that computes in the browser, and a plotly what-if figure.

:class:`Calculator` is an `anywidget <https://anywidget.dev>`_ whose front end (``calculator.js``,
shipped in the package, no CDN) computes every number itself with the formulas of
:mod:`eaglekit.core.speedup.specmath`, so its sliders work the same in JupyterLab and in a rendered page
with no kernel (the report renders anywidgets from their stored state). :func:`numbers` is the
Python twin of the front end's ``compute()``; the browser tests check the two agree.
:func:`whatif_figure` precomputes a plotly chart for a grid of accept lengths and moves the current
point with plotly's own slider. plotly and anywidget are imported where used.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eaglekit.view.frontend import esm
from eaglekit.core.serving.account import Account
from eaglekit.core.errors import InputError
from eaglekit.core.speedup.specmath import (
    Estimate,
    Scenario,
    alpha_for_accept_length,
    cycle_ms,
    estimate,
    expected_accept_length,
    reach,
    throughput,
)

__all__ = ["Calculator", "chart_traces", "numbers", "throughput_figure", "whatif_figure"]

#: Chains drawn for comparison: each line ends at its ceiling k + 1 tokens per cycle.
K_CURVES = (1, 2, 3, 4, 6, 8)
#: Named scenarios for :meth:`Calculator.preset`: scenario, accept length, target tok/s. "seed" is the seed's
#: measured deployment (k = 2 draft steps of 1.67 ms: 60 tok/s at accept length 2.0, see
#: :meth:`eaglekit.core.serving.account.Account.seed`) with the verify growing with k as K2.5's cost model predicts (its
#: mean slope, :attr:`~eaglekit.core.serving.account.GrowingVerify.slope_ms`); "seed-constant-verify" the same with the
#: verify held at 30 ms; "seed-verify-only" the 30 ms verify-only arithmetic.
_SEED = Account.seed()
PRESETS: dict[str, tuple[Scenario, float, float]] = {
    "seed": (_SEED.growing_scenario, 2.0, 150.0),
    "seed-constant-verify": (_SEED.scenario, 2.0, 150.0),
    "seed-verify-only": (Scenario.seed(), 2.0, 150.0),
}
_CURRENT, _NEEDED = "current", "needed for target"
_UNBOUNDED_TOP = 8.0  # where the x axis and the what-if grid stop for an unbounded chain


def _drawn(s: Scenario, k_curves: Sequence[int]) -> tuple[int, ...]:
    """The other step counts worth drawing. They differ from the scenario's own line only by their draft
    cost: with none they lie on it, so they are drawn only when a draft step costs something."""
    return tuple(k_curves) if s.draft_ms > 0 and s.steps is not None else ()


def _x_max(est: Estimate, k_curves: Sequence[int]) -> float:
    k_curves = _drawn(est.scenario, k_curves)
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
    k_curves = _drawn(s, k_curves)
    others = "other chains: k = " + ", ".join(str(j) for j in k_curves)  # one legend entry for all
    for j in k_curves:
        cycle = cycle_ms(s.verify_at(j), draft_ms=s.draft_ms, steps=j, overhead_ms=s.overhead_ms)
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

    ``widget=True`` returns a ``go.FigureWidget`` (live in a kernel); otherwise a ``go.Figure``.
    """
    import plotly.graph_objects as go

    k_curves = _drawn(est.scenario, k_curves)
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




# -- the calculator ------------------------------------------------------------------------------------

FRONT_END = Path(__file__).resolve().parent / "calculator.js"
STYLE = Path(__file__).resolve().parent / "calculator.css"
#: The calculator's controls and their ranges (the front end's CONTROLS): name -> (min, max).
RANGES = {"baseline_tps": (1, 400), "verify_ms": (1, 200), "verify_growth_ms": (0, 50), "draft_ms": (0, 20),
          "steps": (1, 10),
          "overhead_ms": (0, 50), "accept_length": (1, 11), "alpha": (0, 0.99), "target_tps": (1, 600)}


def verify_now(verify_ms: float, k: int | None, anchor: int | None, growth: float) -> float:
    """The verify at ``k`` steps on the one verify model the account uses: ``verify_ms`` was measured at ``anchor``
    steps and grows ``growth`` ms per drafted token (:class:`~eaglekit.core.serving.account.GrowingVerify`)."""
    if k is None or anchor is None:
        return verify_ms
    return verify_ms + (k - anchor) * growth


def numbers(p: dict[str, Any]) -> dict[str, Any]:
    """One scenario's numbers from the calculator's control values ``p`` (the keys of :data:`RANGES`, plus
    ``unbounded`` and ``mode``), computed with :mod:`eaglekit.core.speedup.specmath`: the Python twin of the front
    end's ``compute()``, key for key. An accept length above k + 1 is computed at k + 1 and reported in
    ``clamped`` (``{"asked": L, "ceiling": k + 1}``), never silently. A verify growth that would leave the
    verify of one draft under a tenth of the verify at k is computed at that bound and reported in
    ``growth_capped`` (``{"asked": g, "used": bound}``)."""
    k = None if p["unbounded"] else int(round(p["steps"]))
    anchor = k if k is None or not p.get("verify_steps") else int(p["verify_steps"])
    growth, growth_capped = (0.0 if k is None else float(p.get("verify_growth_ms", 0.0))), None
    if k is not None and anchor > 1 and growth > 0.9 * p["verify_ms"] / (anchor - 1):
        growth_capped = {"asked": growth, "used": 0.9 * p["verify_ms"] / (anchor - 1)}
        growth = growth_capped["used"]
    draft = 0.0 if k is None else float(p["draft_ms"])
    verify = verify_now(p["verify_ms"], k, anchor, growth)
    cycle = cycle_ms(verify, draft_ms=draft, steps=k, overhead_ms=p["overhead_ms"])
    clamped = None
    if p["mode"] == "alpha":
        alpha = float(p["alpha"])
        L = expected_accept_length(alpha, k=k)
    else:
        L = float(p["accept_length"])
        if k is not None and L > k + 1:
            clamped, L = {"asked": L, "ceiling": k + 1}, float(k + 1)
        alpha = alpha_for_accept_length(L, k=k)
    est = estimate(Scenario(p["baseline_tps"], verify, draft_ms=draft, steps=k, overhead_ms=p["overhead_ms"]),
                   accept_length=L, target_tps=p["target_tps"])
    out: dict[str, Any] = {
        "verify_now_ms": verify, "cycle_ms": cycle, "accept_length": L, "alpha": alpha, "tokens_per_s": est.tokens_per_s,
        "speedup": est.speedup, "break_even_accept_length": est.break_even_accept_length, "clamped": clamped,
        "target_accept_length": est.target.accept_length, "target_alpha": est.target.alpha,
        "target_max_draft_ms": None, "target_min_steps": None, "target_min_steps_accept_length": None,
        "target_min_steps_alpha": None, "growth_capped": growth_capped,
    }
    if k is not None and est.target.alpha is None:
        r = reach(p["target_tps"], verify_ms=verify, steps=k, draft_ms=draft, overhead_ms=p["overhead_ms"],
                  verify_growth_ms=growth)
        out.update(target_max_draft_ms=r.max_draft_ms, target_min_steps=r.min_steps,
                   target_min_steps_accept_length=r.min_steps_accept_length, target_min_steps_alpha=r.min_steps_alpha)
    return out


@functools.cache
def _widget_class() -> type:
    import anywidget
    import traitlets as t

    class CalculatorWidget(anywidget.AnyWidget):
        _esm = esm(FRONT_END)
        _css = STYLE.read_text(encoding="utf-8")
        baseline_tps = t.Float(82.0).tag(sync=True)
        verify_ms = t.Float(30.0).tag(sync=True)
        verify_growth_ms = t.Float(0.0).tag(sync=True)
        verify_steps = t.Int(0).tag(sync=True)  # the k verify_ms was measured at (0: the current steps)
        draft_ms = t.Float(0.0).tag(sync=True)
        steps = t.Int(2).tag(sync=True)
        unbounded = t.Bool(True).tag(sync=True)
        overhead_ms = t.Float(0.0).tag(sync=True)
        mode = t.Unicode("accept_length").tag(sync=True)
        accept_length = t.Float(2.0).tag(sync=True)
        alpha = t.Float(0.5).tag(sync=True)
        target_tps = t.Float(150.0).tag(sync=True)

    return CalculatorWidget


class Calculator:
    """The accept-length calculator: sliders for a scenario, readouts and a chart, all computed in the browser.

    Shows itself as the last line of a cell (an anywidget). ``widget`` holds the control values as
    traitlets (``baseline_tps``, ``verify_ms``, ``draft_ms``, ``steps``, ``unbounded``, ``overhead_ms``,
    ``mode`` ("accept_length" or "alpha"), ``accept_length``, ``alpha``, ``target_tps``); moving a
    slider in JupyterLab updates them, and :attr:`readouts` / :attr:`estimate` recompute from them.
    """

    def __init__(self, scenario: Scenario | None = None, *, accept_length: float = 2.0, target_tps: float = 150.0):
        self.widget = _widget_class()()
        self.apply(scenario or PRESETS["seed"][0], accept_length=accept_length, target_tps=target_tps)

    @classmethod
    def preset(cls, name: str = "seed") -> Calculator:
        """A calculator loaded with a named scenario from :data:`PRESETS` ("seed": the measured deployment,
        82 tok/s, 30 ms verify, k = 2 steps of 1.67 ms, accept length 2.0 -> 60 tok/s)."""
        if name not in PRESETS:
            raise InputError(f"unknown preset {name!r}: choose one of {sorted(PRESETS)}")
        scenario, accept_length, target_tps = PRESETS[name]
        return cls(scenario, accept_length=accept_length, target_tps=target_tps)

    def apply(self, scenario: Scenario, *, accept_length: float, target_tps: float) -> None:
        """Set every control from ``scenario`` at once."""
        values = {"baseline_tps": scenario.baseline_tps, "verify_ms": scenario.verify_ms,
                  "verify_growth_ms": scenario.verify_growth_ms,
                  "verify_steps": scenario.steps or 0 if scenario.verify_growth_ms else 0,
                  "draft_ms": scenario.draft_ms, "steps": scenario.steps or 2, "unbounded": scenario.steps is None,
                  "overhead_ms": scenario.overhead_ms, "mode": "accept_length", "accept_length": accept_length,
                  "alpha": alpha_for_accept_length(min(accept_length, (scenario.steps or 100) + 1), k=scenario.steps),
                  "target_tps": target_tps}
        for name, value in values.items():
            lo, hi = RANGES.get(name, (None, None))
            if lo is not None and not lo <= value <= hi:
                raise InputError(f"{name} = {value:g} is outside the calculator's range {lo:g} to {hi:g}")
        with self.widget.hold_sync():
            for name, value in values.items():
                setattr(self.widget, name, value)

    @property
    def values(self) -> dict[str, Any]:
        """The controls' current values."""
        return {name: getattr(self.widget, name) for name in (*RANGES, "unbounded", "mode", "verify_steps")}

    @property
    def readouts(self) -> dict[str, Any]:
        """The numbers the front end shows for the current values (:func:`numbers`)."""
        return numbers(self.values)

    @property
    def estimate(self) -> Estimate:
        """The current values as a :class:`~eaglekit.core.speedup.specmath.Estimate` (at the clamped accept length)."""
        p, r = self.values, self.readouts
        k = None if p["unbounded"] else p["steps"]
        verify = p["verify_ms"] if k is None else r["verify_now_ms"]
        s = Scenario(p["baseline_tps"], verify, draft_ms=0.0 if k is None else p["draft_ms"], steps=k,
                     overhead_ms=p["overhead_ms"], verify_growth_ms=0.0 if k is None else p["verify_growth_ms"])
        return estimate(s, accept_length=r["accept_length"], target_tps=p["target_tps"])

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
