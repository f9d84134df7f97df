"""The serving plan's figures and its widget.

:func:`plan_throughput_figure` draws tokens/s (all requests) against batch size, one line per k;
:func:`plan_steps_figure` the best k per batch size. :class:`PlanWidget` is an `anywidget <https://anywidget.dev>`_
whose front end (``serving.js``, shipped in the package) recomputes the plan in the browser from the cost
model's inputs, so its batch-size and context sliders work in JupyterLab and in a rendered page with no
kernel. :func:`numbers` is the Python twin of the front end's ``compute()``. plotly and anywidget are
imported where used.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

from eaglekit.analysis.serving.plan import ServingPlan
from eaglekit.core.errors import InputError
from eaglekit.core.serving.costmodel import CostModel, Gpu, ModelShape
from eaglekit.core.serving.plan import (
    Acceptance,
    Cost,
    best_steps,
    plan_batches,
    schedule_from_steps,
    stops_paying_from,
)
from eaglekit.view.frontend import esm

__all__ = ["PlanWidget", "numbers", "plan_grid_figure", "plan_steps_figure", "plan_throughput_figure",
           "values_from_plan"]

FRONT_END = Path(__file__).resolve().parent / "serving.js"
STYLE = Path(__file__).resolve().parent / "serving.css"


def plan_throughput_figure(plan: ServingPlan) -> Any:
    """tok/s (all requests) against batch size, one line per k; the best k at each batch size marked with its 95%
    interval. Batch sizes that do not fit in memory are left out."""
    import plotly.graph_objects as go

    fit = plan.fitting
    xs = [p.batch for p in fit]
    fig = go.Figure()
    for k in range(plan.max_steps + 1):
        fig.add_trace(go.Scatter(x=xs, y=[p.options[k].tokens_per_s for p in fit], mode="lines+markers",
                                 name="no speculation" if k == 0 else f"k = {k}",
                                 line={"width": 3 if k == 0 else 1.5, "dash": "dash" if k == 0 else "solid"}))
    for cand in plan.blocks:  # each block drafter's best K per batch size, with its 95% interval
        opts = [max((o for o in p.blocks if o.family == cand.family), key=lambda o: o.tokens_per_s) for p in fit]
        fig.add_trace(go.Scatter(x=xs, y=[o.tokens_per_s for o in opts], mode="lines+markers", name=f"{cand.name} (best K)",
                                 line={"width": 2, "dash": "dot"}, text=[o.family_label() for o in opts],
                                 error_y={"type": "data", "symmetric": False,
                                          "array": [(o.tps.high or o.tokens_per_s) - o.tokens_per_s for o in opts],
                                          "arrayminus": [o.tokens_per_s - (o.tps.low or o.tokens_per_s) for o in opts]}))
    best = [p.best for p in fit]
    fig.add_trace(go.Scatter(x=xs, y=[b.tokens_per_s for b in best], mode="markers", name="best k",
                             marker={"size": 13, "symbol": "circle-open", "color": "black", "line": {"width": 2}},
                             error_y={"type": "data", "symmetric": False,
                                      "array": [(b.tps.high or b.tokens_per_s) - b.tokens_per_s for b in best],
                                      "arrayminus": [b.tokens_per_s - (b.tps.low or b.tokens_per_s) for b in best]},
                             text=[b.family_label() if b.block else f"k = {b.steps}" for b in best]))
    fig.update_layout(title="Throughput against batch size, one line per draft steps k (best: 95% interval)",
                      xaxis={"title": "batch size (concurrent requests)", "type": "log", **_batch_ticks(xs)},
                      yaxis={"title": "tokens per second, all requests", "rangemode": "tozero"}, height=460)
    return fig


def _batch_ticks(batches: list[int], most: int = 10) -> dict[str, Any]:
    """A log axis labelled at the batch sizes priced (every other one past ``most``), not plotly's 2s and 5s of
    each decade, which crowd the axis."""
    xs = sorted(set(batches))
    step = max(1, -(-len(xs) // most))
    shown = xs[::step]
    return {"tickmode": "array", "tickvals": shown, "ticktext": [str(x) for x in shown]}


def plan_steps_figure(plan: ServingPlan) -> Any:
    """The best k per batch size (a step line: vLLM's schedule), with the speedup it gives."""
    import plotly.graph_objects as go

    fit = plan.fitting
    xs = [p.batch for p in fit]
    fig = go.Figure(go.Scatter(x=xs, y=[p.best.steps for p in fit], mode="lines+markers", line_shape="hv",
                               name="best k", text=[f"{p.best.gain.text(2)}x, {p.verdict}" for p in fit],
                               hovertemplate="batch %{x}: k = %{y} (%{text} no speculation)<extra></extra>"))
    stop = plan.stops_paying_at
    title = "Best draft steps per batch size" + ("" if stop is None else f" (speculation stops paying at batch {stop})")
    fig.update_layout(title=title, xaxis={"title": "batch size", "type": "log", **_batch_ticks(xs)},
                      yaxis={"title": "best k", "rangemode": "tozero", "dtick": 1}, height=380)
    return fig


def plan_grid_figure(plan: ServingPlan) -> Any:
    """The whole priced grid as a heatmap: speedup over no speculation at each (batch size, k); measured cells
    marked with a square, the best k per batch size with a circle, batch sizes that do not fit greyed out. The
    hover text gives each cell's tok/s with its 95% interval."""
    import plotly.graph_objects as go

    ks = list(range(plan.max_steps + 1))
    ys = [str(p.batch) for p in plan.plans]
    z, text = [], []
    for p in plan.plans:
        z.append([o.speedup if p.fits else None for o in p.options])
        text.append([f"batch {p.batch}, k = {o.steps}: {o.tps.text(0)} tok/s, {o.gain.text(2)}x"
                     + (" (measured)" if o.measured else "") + ("" if p.fits else " - does not fit in memory")
                     for o in p.options])
    fig = go.Figure(go.Heatmap(z=z, x=ks, y=ys, text=text, hoverinfo="text", colorscale="RdBu", zmid=1.0,
                               colorbar={"title": "speedup"}))
    mx = [(o.steps, str(p.batch)) for p in plan.plans for o in p.options if o.measured]
    if mx:
        fig.add_trace(go.Scatter(x=[m[0] for m in mx], y=[m[1] for m in mx], mode="markers", name="measured",
                                 marker={"symbol": "square-open", "size": 16, "color": "black", "line": {"width": 2}}))
    bx = [(p.best_chain.steps, str(p.batch)) for p in plan.fitting]
    fig.add_trace(go.Scatter(x=[b[0] for b in bx], y=[b[1] for b in bx], mode="markers", name="best k",
                             marker={"symbol": "circle-open", "size": 11, "color": "gold", "line": {"width": 3}}))
    fig.update_layout(title="Speedup over no speculation at every (batch size, k)",
                      xaxis={"title": "draft steps k", "dtick": 1}, yaxis={"title": "batch size", "type": "category"},
                      height=140 + 34 * len(ys), legend={"orientation": "h", "y": -0.2})
    return fig


# -- the widget --------------------------------------------------------------------------------------------

_SHAPE_KEYS = ("experts", "experts_per_token", "moe_layers", "expert_bytes", "always_bytes", "active_params",
               "kv_bytes_per_token", "attn_flops_per_context_token")


def numbers(p: dict[str, Any]) -> dict[str, Any]:
    """The widget's numbers for control values ``p``, with :mod:`eaglekit.core.serving.costmodel` and
    :mod:`eaglekit.core.serving.plan`: the Python twin of ``serving.js``'s ``compute()``, key for key."""
    if p["generic"]:
        shape = None
    else:
        shape = ModelShape("widget", 0, int(p["moe_layers"]), int(p["experts"]), int(p["experts_per_token"]),
                           float(p["expert_bytes"]), 0.0, float(p["always_bytes"]), float(p["active_params"]),
                           float(p["kv_bytes_per_token"]), int(p["kv_heads"]) or None,
                           float(p["attn_flops_per_context_token"]))
    g = Gpu("widget", float(p["hbm_tb_s"]), float(p["tflops"]), float(p["tflops"]))
    model = CostModel(shape, g, int(p["tp"]), int(p["context"]), float(p["fixed_ms"]), float(p["mem"]),
                      float(p["compute"]), p["combine"], per_token_ms=float(p.get("per_token_ms", 0.0)),
                      per_verify_ms=float(p.get("per_verify_ms", 0.0)),
                      per_request_ms=float(p.get("per_request_ms", 0.0)),
                      misfit=tuple((int(b), float(r)) for b, r in p.get("decode_offsets", ())),
                      verify_top=int(p.get("verify_tokens_measured", 0)), carry_excess=bool(p.get("carry_excess")))
    acc = Acceptance(tuple(p["per_step"]))

    def target(b: int, n: int) -> Cost:
        return Cost(model.ms(b, n), False)

    def draft(b: int) -> Cost:
        return Cost(p["draft_fixed_ms"] + p["draft_per_request_ms"] * b, False)

    batch = 2 ** round(p["batch_log2"])
    overhead = 0.0 if p["draft_free"] else float(p.get("overhead_ms", 0.0))
    cells = {(int(c[0]), int(c[1])): (float(c[2]), float(c[3])) for c in p.get("measured_cells", ())}

    def rows(b: int) -> list[dict[str, Any]]:
        """Every k at batch ``b``; a measured run's cell as measured (its accept length and cycle)."""
        every = plan_batches((b,), acc, target, None if p["draft_free"] else draft, max_steps=int(p["max_steps"]),
                             overhead_ms=overhead)[0]
        out, base = [], 0.0
        for o in every.options:
            L, cycle = cells.get((b, o.steps), (o.accept_length, o.cycle_ms))
            per_request = L * 1000.0 / cycle
            total = b * per_request
            base = total if o.steps == 0 else base
            out.append({"steps": o.steps, "accept_length": L, "verify_ms": o.verify.ms, "draft_ms": o.draft.ms,
                        "cycle_ms": cycle, "per_request_tokens_per_s": per_request, "tokens_per_s": total,
                        "speedup": total / base})
        return out

    opts = rows(batch)
    usable, weights, kv = (float(p.get(k, 0.0)) for k in ("cap_usable_gb", "cap_weights_gb", "cap_kv_gb_per_token"))

    def fits(b: int) -> bool:  # eaglekit.core.serving.capacity.Capacity.fits at the control's context
        return usable <= 0 or weights + b * kv * int(p["context"]) <= usable

    planned = tuple(b for b in p["batches"] if fits(b))
    ks = [best_steps([o["tokens_per_s"] for o in rows(b)]) for b in planned]
    return {"batch": batch, "options": opts, "best_steps": best_steps([o["tokens_per_s"] for o in opts]),
            "schedule": [list(r) for r in schedule_from_steps(planned, ks)] if planned else [],
            "stops_paying_at": stops_paying_from(planned, ks),
            "fits": fits(batch),
            "distinct_experts": [None if shape is None else shape.distinct_experts(batch * (k + 1))
                                 for k in range(int(p["max_steps"]) + 1)]}


def values_from_plan(plan: ServingPlan, *, batch: int = 1) -> dict[str, Any]:
    """The widget's control values for a plan: its cost model's inputs, acceptance, draft line, batch sizes."""
    m, s = plan.model, plan.model.shape
    g = m.gpu
    out: dict[str, Any] = {k: 0.0 for k in _SHAPE_KEYS}
    out.update(kv_heads=0, generic=s is None)
    if s is not None:
        out.update({k: float(getattr(s, k)) for k in _SHAPE_KEYS})
        out.update(experts=s.experts, experts_per_token=s.experts_per_token, moe_layers=s.moe_layers,
                   kv_heads=s.kv_heads or 0)
    tflops = g.tflops(s.compute) if g is not None and s is not None else 1000.0
    out.update(hbm_tb_s=g.hbm_tb_s if g is not None else 1.0, tflops=tflops, tp=m.tp, context=m.context,
               fixed_ms=m.fixed_ms, mem=m.mem, compute=m.compute, combine=m.combine, per_token_ms=m.per_token_ms,
               per_verify_ms=m.per_verify_ms, verify_tokens_measured=m.verify_tokens_measured or 0,
               carry_excess=m.carry_excess,
               per_request_ms=m.per_request_ms, decode_offsets=[[b, r] for b, r in m.misfit],
               cap_usable_gb=0.0 if plan.capacity is None else plan.capacity.usable_gb,
               cap_weights_gb=0.0 if plan.capacity is None else plan.capacity.weights_gb,
               cap_kv_gb_per_token=0.0 if plan.capacity is None or not m.context else
               plan.capacity.kv_gb_per_request / m.context,
               per_step=list(plan.acceptance.per_step), max_steps=plan.max_steps, batches=list(plan.batches),
               batch_log2=max(0, min(12, round(math.log2(batch)))))
    f = plan.fit
    # the plan's own choices (they weigh the intervals the widget cannot recompute), shown while its inputs hold
    out.update(measured_cells=[[r.batch, r.steps, r.accept_length, r.cycle_ms] for r in plan.runs.runs
                                if r.chain and r.steps <= plan.max_steps and r not in plan.foreign_runs])
    out.update(plan_choice=[[p.batch, p.best_eagle.steps, p.verdict, list(p.overlapping)] for p in plan.plans if p.fits],
               plan_schedule=dict(plan.schedule), plan_stops_paying_at=plan.stops_paying_at)
    out.update(draft_free=f is None, draft_fixed_ms=0.0 if f is None else f.value[0],
               draft_per_request_ms=0.0 if f is None else f.value[1], overhead_ms=0.0 if f is None else f.value[2])
    return out


@functools.cache
def _widget_class() -> type:
    import anywidget
    import traitlets as t

    class ServingWidget(anywidget.AnyWidget):
        _esm = esm(FRONT_END)
        _css = STYLE.read_text(encoding="utf-8")
        generic = t.Bool(False).tag(sync=True)
        experts = t.Int(0).tag(sync=True)
        experts_per_token = t.Int(0).tag(sync=True)
        moe_layers = t.Int(0).tag(sync=True)
        expert_bytes = t.Float(0.0).tag(sync=True)
        always_bytes = t.Float(0.0).tag(sync=True)
        active_params = t.Float(0.0).tag(sync=True)
        kv_bytes_per_token = t.Float(0.0).tag(sync=True)
        kv_heads = t.Int(0).tag(sync=True)
        attn_flops_per_context_token = t.Float(0.0).tag(sync=True)
        hbm_tb_s = t.Float(1.0).tag(sync=True)
        tflops = t.Float(1000.0).tag(sync=True)
        tp = t.Int(1).tag(sync=True)
        context = t.Int(4096).tag(sync=True)
        fixed_ms = t.Float(0.0).tag(sync=True)
        mem = t.Float(1.0).tag(sync=True)
        compute = t.Float(1.0).tag(sync=True)
        combine = t.Unicode("max").tag(sync=True)
        per_step = t.List(t.Float()).tag(sync=True)
        max_steps = t.Int(8).tag(sync=True)
        batches = t.List(t.Int()).tag(sync=True)
        batch_log2 = t.Int(0).tag(sync=True)
        draft_free = t.Bool(True).tag(sync=True)
        draft_fixed_ms = t.Float(0.0).tag(sync=True)
        draft_per_request_ms = t.Float(0.0).tag(sync=True)
        overhead_ms = t.Float(0.0).tag(sync=True)
        per_token_ms = t.Float(0.0).tag(sync=True)
        per_verify_ms = t.Float(0.0).tag(sync=True)
        verify_tokens_measured = t.Int(0).tag(sync=True)
        carry_excess = t.Bool(False).tag(sync=True)
        per_request_ms = t.Float(0.0).tag(sync=True)
        decode_offsets = t.List(t.List()).tag(sync=True)
        plan_choice = t.List(t.List()).tag(sync=True)
        measured_cells = t.List(t.List()).tag(sync=True)
        plan_schedule = t.Dict(allow_none=True).tag(sync=True)
        plan_stops_paying_at = t.Int(None, allow_none=True).tag(sync=True)
        cap_usable_gb = t.Float(0.0).tag(sync=True)
        cap_weights_gb = t.Float(0.0).tag(sync=True)
        cap_kv_gb_per_token = t.Float(0.0).tag(sync=True)

    return ServingWidget


class PlanWidget:
    """A plan's cost model with batch-size and context sliders, recomputed in the browser (no kernel needed).

    ``values`` holds the controls; :attr:`readouts` is what the front end shows (:func:`numbers`)."""

    def __init__(self, plan: ServingPlan, *, batch: int = 1):
        if plan.model.context < 0:
            raise InputError("the plan's context length is negative")
        self.widget = _widget_class()()
        with self.widget.hold_sync():
            for name, value in values_from_plan(plan, batch=batch).items():
                setattr(self.widget, name, value)

    @property
    def values(self) -> dict[str, Any]:
        names = [n for n in self.widget.trait_names(sync=True) if not n.startswith("_") and n not in
                 ("layout", "tabbable", "tooltip", "comm", "keys", "log")]
        return {n: getattr(self.widget, n) for n in names}

    @property
    def readouts(self) -> dict[str, Any]:
        return numbers(self.values)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)
