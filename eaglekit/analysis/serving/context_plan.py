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
from eaglekit.core.render import html_table, text_table
from eaglekit.core.serving.schedules import PlanChoices


@dataclass(frozen=True)
class ContextPlan:
    """One :class:`~eaglekit.analysis.serving.plan.ServingPlan` per context length (same batch sizes)."""

    contexts: tuple[int, ...]
    plans: tuple[ServingPlan, ...]
    method: str = "eagle3"

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
        return f"k={b.steps} {gain}x {p.verdict}"

    def _headers(self) -> list[str]:
        return ["batch"] + [f"context {c}" for c in self.contexts]

    def _rows(self) -> list[list[str]]:
        return [[str(b)] + [self._cell_text(c, b) for c in self.contexts] for b in self.batches]

    def _notes(self) -> list[str]:
        out = []
        for c, p in zip(self.contexts, self.plans):
            stop = p.stops_paying_at
            out.append(f"context {c}: acceptance from {p.acceptance.source}; "
                       + ("speculation pays at every planned batch size" if stop is None
                          else f"stops paying from batch {stop}"))
        return out

    def __str__(self) -> str:
        return ("Serving plan by batch size and context length (best k, speedup of the best speculative option with "
                "its 95% interval against no speculation, verdict)\n\n"
                + text_table(self._headers(), self._rows()) + "\n\n" + "\n".join(self._notes()))

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
                              "verdict": p.verdict if p.fits else None,
                              **(spec.gain.fields("speedup") if spec is not None else {"speedup": None})})
        return {"contexts": list(self.contexts), "batches": list(self.batches), "cells": cells,
                "stops_paying_at": {str(c): s for c, s in self.stops_paying_at().items()},
                "acceptance_sources": {str(c): p.acceptance.source for c, p in zip(self.contexts, self.plans)}}


def plan_by_context(acceptances: Sequence[Any], contexts: Sequence[int], *,
                    measured_by_context: Mapping[int, Any] | None = None, **plan_args: Any) -> ContextPlan:
    """:func:`~eaglekit.analysis.serving.plan.plan` at each of ``contexts`` (``plan_args`` as it takes them, less
    ``context``) with ``acceptances[i]`` at ``contexts[i]``; ``measured_by_context``: the runs measured at each
    context (they replace ``measured``; a context without runs is priced by the cost model alone)."""
    from eaglekit.analysis.serving.plan import plan
    from eaglekit.core.serving.context import check_contexts

    contexts = check_contexts(contexts)
    plans = []
    for a, c in zip(acceptances, contexts):
        args = dict(plan_args)
        if measured_by_context is not None:
            args["measured"] = measured_by_context.get(c) or None
        plans.append(plan(a, context=c, **args))
    return ContextPlan(contexts, tuple(plans))
