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

from eaglekit.view.frontend import esm
from eaglekit.analysis.serving.plan import ServingPlan
from eaglekit.core.serving.costmodel import CostModel, Gpu, ModelShape
from eaglekit.core.errors import InputError
from eaglekit.core.serving.plan import (
    Acceptance,
    Cost,
    best_steps,
    plan_batches,
    schedule_from_steps,
)

__all__ = ["PlanWidget", "numbers", "plan_steps_figure", "plan_throughput_figure", "values_from_plan"]

FRONT_END = Path(__file__).resolve().parent / "serving.js"
STYLE = Path(__file__).resolve().parent / "serving.css"


def plan_throughput_figure(plan: ServingPlan) -> Any:
    """tok/s (all requests) against batch size, one line per k; the best k at each batch size marked."""
    import plotly.graph_objects as go

    xs = [p.batch for p in plan.plans]
    fig = go.Figure()
    for k in range(plan.max_steps + 1):
        fig.add_trace(go.Scatter(x=xs, y=[p.options[k].tokens_per_s for p in plan.plans], mode="lines+markers",
                                 name="no speculation" if k == 0 else f"k = {k}",
                                 line={"width": 3 if k == 0 else 1.5, "dash": "dash" if k == 0 else "solid"}))
    fig.add_trace(go.Scatter(x=xs, y=[p.best.tokens_per_s for p in plan.plans], mode="markers", name="best k",
                             marker={"size": 13, "symbol": "circle-open", "color": "black", "line": {"width": 2}},
                             text=[f"k = {p.best.steps}" for p in plan.plans]))
    fig.update_layout(title="Throughput against batch size, one line per draft steps k",
                      xaxis={"title": "batch size (concurrent requests)", "type": "log"},
                      yaxis={"title": "tokens per second, all requests", "rangemode": "tozero"}, height=460)
    return fig


def plan_steps_figure(plan: ServingPlan) -> Any:
    """The best k per batch size (a step line: vLLM's schedule), with the speedup it gives."""
    import plotly.graph_objects as go

    xs = [p.batch for p in plan.plans]
    fig = go.Figure(go.Scatter(x=xs, y=[p.best.steps for p in plan.plans], mode="lines+markers", line_shape="hv",
                               name="best k", text=[f"{p.best.speedup:.2f}x" for p in plan.plans],
                               hovertemplate="batch %{x}: k = %{y} (%{text} no speculation)<extra></extra>"))
    stop = plan.stops_paying_at
    title = "Best draft steps per batch size" + ("" if stop is None else f" (speculation stops paying at batch {stop})")
    fig.update_layout(title=title, xaxis={"title": "batch size", "type": "log"},
                      yaxis={"title": "best k", "rangemode": "tozero", "dtick": 1}, height=380)
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
                      float(p["compute"]), p["combine"])
    acc = Acceptance(tuple(p["per_step"]))

    def target(b: int, n: int) -> Cost:
        return Cost(model.ms(b, n), False)

    def draft(b: int) -> Cost:
        return Cost(p["draft_fixed_ms"] + p["draft_per_request_ms"] * b, False)

    batch = 2 ** round(p["batch_log2"])
    every = plan_batches((batch,), acc, target, None if p["draft_free"] else draft, max_steps=int(p["max_steps"]))[0]
    opts = [{"steps": o.steps, "accept_length": o.accept_length, "verify_ms": o.verify.ms, "draft_ms": o.draft.ms,
             "cycle_ms": o.cycle_ms, "per_request_tokens_per_s": o.per_request_tokens_per_s,
             "tokens_per_s": o.tokens_per_s, "speedup": o.speedup} for o in every.options]
    plans = plan_batches(tuple(p["batches"]), acc, target, None if p["draft_free"] else draft,
                         max_steps=int(p["max_steps"]))
    ks = [pl.best.steps for pl in plans]
    return {"batch": batch, "options": opts, "best_steps": best_steps([o["tokens_per_s"] for o in opts]),
            "schedule": [list(r) for r in schedule_from_steps(tuple(p["batches"]), ks)],
            "stops_paying_at": next((b for b, k in zip(p["batches"], ks) if k == 0), None),
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
               fixed_ms=m.fixed_ms, mem=m.mem, compute=m.compute, combine=m.combine,
               per_step=list(plan.acceptance.per_step), max_steps=plan.max_steps, batches=list(plan.batches),
               batch_log2=max(0, min(12, round(math.log2(batch)))))
    d = plan.draft
    out.update(draft_free=d is None, draft_fixed_ms=0.0 if d is None else d.fixed_ms,
               draft_per_request_ms=0.0 if d is None else d.per_request_ms)
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
