"""``eaglekit plan --contexts``: the full serving plan at each context length, read as one (batch, context) grid.

Each context gets its own :func:`~eaglekit.analysis.serving.plan.plan` (the cost model at that context: the verify's
KV read and attention grow with it, and the KV cache decides which batch sizes fit) with the acceptance measured
there (:func:`~eaglekit.core.serving.context.acceptance_at_contexts`), so every cell keeps its interval and its
GO / NO-GO / TOO CLOSE TO CALL. :meth:`ContextPlan.choices` feeds the schedule writers
(:mod:`eaglekit.core.serving.schedules`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eaglekit.analysis.serving.plan import ServingPlan
from eaglekit.core.errors import InputError
from eaglekit.core.render import html_table, text_table
from eaglekit.core.serving.schedules import PlanChoices


@dataclass(frozen=True, repr=False)
class ContextPlan:
    """One :class:`~eaglekit.analysis.serving.plan.ServingPlan` per context length (same batch sizes)."""

    contexts: tuple[int, ...]
    plans: tuple[ServingPlan, ...]
    method: str = "eagle3"
    #: per context, the plans priced at the low and the high end of the acceptance's interval (where it has one)
    bounds: tuple[tuple[ServingPlan, ...], ...] = ()

    @property
    def batches(self) -> tuple[int, ...]:
        return self.plans[0].batches

    def cell(self, context: int, batch: int):
        """The :class:`~eaglekit.core.serving.plan.BatchPlan` at (``context``, ``batch``)."""
        plan = self.plans[self.contexts.index(context)]
        return plan.plans[plan.batches.index(batch)]

    def choices(self) -> PlanChoices:
        """The best EAGLE-3 k per cell (0 where speculation does not pay or the batch does not fit in memory)."""
        steps = tuple(tuple(p.best_eagle.steps if p.fits else 0 for p in plan.plans) for plan in self.plans)
        return PlanChoices(self.batches, self.contexts, steps,
                           tuple(plan.acceptance.per_step for plan in self.plans), self.method)

    def call(self, context: int, batch: int) -> str:
        """The cell's verdict as :func:`eaglekit.judge` gives one: the best speculative option's speedup interval
        against 1, TOO CLOSE TO CALL where a reading of the verify (:attr:`ServingPlan.readings`) or an end of the
        acceptance's interval (:attr:`bounds`) gives another verdict; None where the batch does not fit."""
        i = self.contexts.index(context)
        main = self.cell(context, batch)
        if not main.fits:
            return None  # type: ignore[return-value]
        others = [p for _, p in self.plans[i].readings] + list(self.bounds[i] if self.bounds else ())
        calls = {main.verdict}
        for p in others:
            if batch in p.batches and p.plans[p.batches.index(batch)].fits:
                calls.add(p.plans[p.batches.index(batch)].verdict)
        return main.verdict if len(calls) == 1 else "TOO CLOSE TO CALL"

    def schedule(self, fmt: str, context: int | None = None):
        """The schedule an engine reads, written from this plan's choices
        (:func:`~eaglekit.core.serving.schedules.write_schedule`: ``vllm``, ``vllm-bench``, ``trtllm``, ``sglang`` or
        ``profile``; for the formats without a context axis, ``context`` picks one context's)."""
        from eaglekit.core.serving.schedules import write_schedule

        return write_schedule(self.choices(), fmt, context=context)

    def stops_paying_at(self) -> dict[int, int | None]:
        """Per context, the batch size from which speculation stops paying (None: it pays at every planned size)."""
        return {c: p.stops_paying_at for c, p in zip(self.contexts, self.plans)}

    def _cell_text(self, context: int, batch: int) -> str:
        p = self.cell(context, batch)
        if not p.fits:
            return "does not fit"
        b = p.best
        spec = p.challenger
        gain = (spec.gain if spec is not None else b.gain).text()
        return f"k={b.steps} {gain}x {self.call(context, batch)}"

    def _headers(self) -> list[str]:
        return ["batch"] + [f"context {c}" for c in self.contexts]

    def _rows(self) -> list[list[str]]:
        return [[str(b)] + [self._cell_text(c, b) for c in self.contexts] for b in self.batches]

    def _notes(self) -> list[str]:
        out = []
        for c, p in zip(self.contexts, self.plans):
            calls: dict[str, list[str]] = {}
            for b in self.batches:
                call = self.call(c, b)
                calls.setdefault(call or "does not fit", []).append(str(b))
            out.append(f"context {c}: acceptance from {p.acceptance.source}; "
                       + "; ".join(f"{v} at batch {', '.join(bs)}" for v, bs in calls.items()))
        return out

    def __str__(self) -> str:
        return ("Serving plan by batch size and context length (best k, speedup of the best speculative option with "
                "its 95% interval against no speculation, verdict)\n\n"
                + text_table(self._headers(), self._rows()) + "\n\n" + "\n".join(self._notes()))

    __repr__ = __str__  # a notebook's plain-text view is the text

    def _repr_html_(self) -> str:
        return ("<div>" + html_table(self._headers(), self._rows())
                + "".join(f"<p>{n}</p>" for n in self._notes()) + "</div>")

    def to_json(self) -> dict[str, Any]:
        cells = []
        for c in self.contexts:
            for b in self.batches:
                p = self.cell(c, b)
                spec = p.challenger
                cells.append({"context": c, "batch": b, "fits": p.fits, "best_steps": p.best.steps if p.fits else None,
                              "verdict": self.call(c, b) if p.fits else None,
                              **(spec.gain.fields("speedup") if spec is not None else {"speedup": None})})
        return {"contexts": list(self.contexts), "batches": list(self.batches), "cells": cells,
                "stops_paying_at": {str(c): s for c, s in self.stops_paying_at().items()},
                "acceptance_sources": {str(c): p.acceptance.source for c, p in zip(self.contexts, self.plans)}}


def plan_by_context(acceptances: Sequence[Any], contexts: Sequence[int], *,
                    measured_by_context: Mapping[int, Any] | None = None,
                    acceptance_bounds: Sequence[Sequence[Any]] | None = None, **plan_args: Any) -> ContextPlan:
    """:func:`~eaglekit.analysis.serving.plan.plan` at each of ``contexts`` (``plan_args`` as it takes them, less
    ``context``) with ``acceptances[i]`` at ``contexts[i]``; ``measured_by_context``: the runs measured at each
    context (they replace ``measured``; a context without runs is priced by the cost model alone);
    ``acceptance_bounds[i]``: the acceptance at the ends of its interval at ``contexts[i]``, each priced too, so a
    cell whose verdict turns within the interval reads TOO CLOSE TO CALL (:meth:`ContextPlan.call`)."""
    from eaglekit.analysis.serving.plan import plan
    from eaglekit.core.serving.context import check_contexts

    contexts = check_contexts(contexts)
    plans = []
    for a, c in zip(acceptances, contexts):
        args = dict(plan_args)
        if measured_by_context is not None:
            args["measured"] = measured_by_context.get(c) or None
        plans.append(plan(a, context=c, **args))
    bounds = ()
    if acceptance_bounds is not None:
        if len(acceptance_bounds) != len(contexts):
            raise InputError(f"acceptance_bounds gives {len(acceptance_bounds)} entries for {len(contexts)} contexts")
        bounds = tuple(tuple(_plan_one(b, c, plan_args, measured_by_context) for b in ends)
                       for ends, c in zip(acceptance_bounds, contexts))
    return ContextPlan(contexts, tuple(plans), bounds=bounds)


def _plan_one(acceptance: Any, context: int, plan_args: Mapping[str, Any],
              measured_by_context: Mapping[int, Any] | None) -> ServingPlan:
    from eaglekit.analysis.serving.plan import plan

    args = dict(plan_args)
    if measured_by_context is not None:
        args["measured"] = measured_by_context.get(context) or None
    return plan(acceptance, context=context, **args)
