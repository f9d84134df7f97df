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

import math
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
                           what: str = "acceptance result", end: str = "value") -> list[Acceptance]:
    """Each context's acceptance from the result's ``by_position`` buckets (``eaglekit acceptance --by-position N
    --json``): the bucket holding the context; before the first bucket the first, past the last the last (said in
    the source: the drafter was not measured there). Its per-step acceptance over the bucket's cycle starts, and,
    where the result holds the buckets read at every K (``by_position_by_steps``), the bucket's accept length at each
    K as measured (``end``: its ``value``, or the ``low`` / ``high`` end of its interval), as the plan reads a
    result's ``accept_length_by_steps``."""
    prof = result.get("by_position")
    if not isinstance(prof, Mapping) or not isinstance(prof.get("buckets"), list) or not prof["buckets"]:
        raise InputError(f"{what} holds no accept length by position: measure it with `eaglekit acceptance ... "
                         "--by-position N --json` to plan by context length.")
    if end not in ("value", "low", "high"):
        raise InputError(f"end is value, low or high, got {end!r}")
    buckets = prof["buckets"]
    for b in buckets:
        _check_bucket(b, what)
    by_steps = result.get("by_position_by_steps")
    by_steps = by_steps if isinstance(by_steps, list) and all(isinstance(p, Mapping) for p in by_steps) else []
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
        lengths = _lengths_at(by_steps, b, end, what)
        basis = ("the accept length at each k measured in the bucket" + ("" if end == "value" else f" ({end} end "
                 "of its interval)") if lengths else "per-step acceptance at the cycles starting there")
        out.append(Acceptance(tuple(per_step), f"{what}, {where} ({basis})", lengths=lengths))
    return out


def _check_bucket(b: Any, what: str) -> None:
    """One ``by_position`` bucket as ``eaglekit acceptance --json`` writes it, or one line saying what is wrong."""
    def whole(x: Any) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 10**12

    if not isinstance(b, Mapping) or not whole(b.get("start")) or not whole(b.get("end")) or b["end"] <= b["start"]:
        raise InputError(f"{what}: a by_position bucket needs whole start < end positions; got {str(b)[:80]}")
    steps = b.get("per_step_acceptance")
    if not isinstance(steps, list) or any(
            x is not None and (isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 <= x <= 1)
            for x in steps):
        raise InputError(f"{what}: bucket {b['start']}-{b['end'] - 1} holds per-step acceptances that are not "
                         "probabilities in [0, 1]")


def _lengths_at(by_steps: Sequence[Mapping[str, Any]], bucket: Mapping[str, Any], end: str,
                what: str) -> tuple[tuple[int, float], ...]:
    """The accept length at K = 1, 2, ... of the bucket spanning ``bucket``'s positions, from the profiles read at
    each K; () where they are absent or a K lacks the bucket."""
    key = "accept_length" if end == "value" else f"accept_length_{end}"
    out = []
    for k, prof in enumerate(by_steps, 1):
        same = [b for b in prof.get("buckets") or [] if isinstance(b, Mapping)
                and (b.get("start"), b.get("end")) == (bucket["start"], bucket["end"])]
        value = same[0].get(key) if same else None
        if value is None:
            return ()
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or not value >= 1):
            raise InputError(f"{what}: by_position_by_steps holds {str(value)[:40]!r} at K = {k}, not an accept "
                             "length (a finite number >= 1)")
        out.append((k, float(value)))
    return tuple(out)


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
