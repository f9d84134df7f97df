"""The serving plan by (batch size, context length): pure pieces.

Acceptance falls with context for drafters trained on short samples, and the verify's cost grows with it (attention
over the KV cache, MLA's latent reads), so the best k at batch 8 and 2k tokens is not the best at batch 8 and 64k.
Here: the acceptance at each planned context read from an ``eaglekit acceptance --by-position --json`` result's
buckets (:func:`acceptance_at_contexts`), and the core grid :func:`plan_grid`, which prices every (context, batch,
k) cell with costs that are functions of the context (the cost model's KV read and attention FLOPs grow with it;
:mod:`eaglekit.core.serving.costmodel`). :mod:`eaglekit.analysis.serving.context_plan` adds the intervals through
the full plan at each context.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eaglekit.core.errors import InputError
from eaglekit.core.serving.plan import Acceptance, BatchPlan, Cost, plan_batches

#: most contexts one plan prices (each is a full plan)
MAX_CONTEXTS = 16


def check_contexts(contexts: Sequence[int]) -> tuple[int, ...]:
    """Rising whole context lengths >= 1, at most :data:`MAX_CONTEXTS`."""
    out = tuple(contexts)
    if not out or len(out) > MAX_CONTEXTS:
        raise InputError(f"give 1 to {MAX_CONTEXTS} context lengths (e.g. --contexts 2048,16384,65536), got {len(out)}.")
    prev = 0
    for c in out:
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise InputError(f"context lengths are whole numbers of tokens >= 1, got {c!r}.")
        if c <= prev:
            raise InputError(f"context lengths must rise: {c} follows {prev}.")
        prev = c
    return out


def acceptance_at_contexts(result: Mapping[str, Any], contexts: Sequence[int], *,
                           what: str = "acceptance result") -> list[Acceptance]:
    """Each context's per-step acceptance from the result's ``by_position`` buckets (``eaglekit acceptance
    --by-position N --json``): the bucket holding the context; before the first bucket the first, past the last the
    last (said in the source: the drafter was not measured there)."""
    prof = result.get("by_position")
    if not isinstance(prof, Mapping) or not isinstance(prof.get("buckets"), list) or not prof["buckets"]:
        raise InputError(f"{what} holds no accept length by position: measure it with `eaglekit acceptance ... "
                         "--by-position N --json` to plan by context length.")
    buckets = prof["buckets"]
    out = []
    for c in contexts:
        inside = [b for b in buckets if b.get("start", 0) <= c < b.get("end", 0)]
        b = inside[0] if inside else (buckets[0] if c < buckets[0]["start"] else buckets[-1])
        where = (f"positions {b['start']}-{b['end'] - 1}" if inside else
                 f"not measured at {c}: the nearest bucket, positions {b['start']}-{b['end'] - 1}")
        per_step = []
        for x in b.get("per_step_acceptance") or []:
            if x is None:
                break
            per_step.append(float(x))
        if not per_step:
            raise InputError(f"{what}: the bucket at positions {b['start']}-{b['end'] - 1} conditions no step; "
                             "use wider buckets.")
        out.append(Acceptance(tuple(per_step), f"{what}, {where} (per-step acceptance at the cycles starting there)"))
    return out


def plan_grid(batches: Sequence[int], contexts: Sequence[int], acceptance: Callable[[int], Acceptance],
              target: Callable[[int, int, int], Cost], draft: Callable[[int, int], Cost] | None, *,
              max_steps: int = 8, overhead_ms: float = 0.0) -> dict[int, tuple[BatchPlan, ...]]:
    """Point values of every (context, batch, k) cell: ``acceptance(context)``, ``target(batch, tokens, context)``
    and ``draft(batch, context)`` priced by :func:`~eaglekit.core.serving.plan.plan_batches` at each context."""
    out = {}
    for c in check_contexts(contexts):
        d = None if draft is None else (lambda b, c=c: draft(b, c))
        out[c] = plan_batches(batches, acceptance(c), lambda b, n, c=c: target(b, n, c), d, max_steps=max_steps,
                              overhead_ms=overhead_ms)
    return out
