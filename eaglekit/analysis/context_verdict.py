"""One verdict per candidate at each context length: where a drafter stops paying on long traces.

Acceptance falls with context for drafters trained on short samples, so a verdict judged on chat-length requests
says nothing about 4k-token agent traces. :func:`judge_by_context` judges each candidate at each context with the
acceptance measured *there*: the cycles that start in the position bucket holding the context
(:meth:`~eaglekit.analysis.acceptance.result.AcceptanceResult.by_position`, read at every K the plan may choose),
priced by the plan at that context (:func:`~eaglekit.analysis.verdict.judge`: both readings of the verify). The
bucket's accept length carries its own interval (a bootstrap over the requests with cycles there); where the
verdict at either end of that interval differs from the verdict at its centre, the cell is TOO CLOSE TO CALL, as
it is where the two readings of the verify disagree. A context outside the measured buckets is refused: the
drafter was not measured there.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from eaglekit.analysis.verdict import _COLOUR, CandidateVerdict, Verdicts, judge
from eaglekit.core.errors import InputError
from eaglekit.core.render import Html, html_badge, html_table, text_table
from eaglekit.core.serving.context import acceptance_at_contexts, check_contexts
from eaglekit.core.serving.plan import Acceptance
from eaglekit.core.uncertainty import Interval


@dataclass(frozen=True, repr=False)
class ContextVerdicts:
    """Each candidate's verdict at each of ``contexts`` (``by_context[i]`` the :class:`~eaglekit.analysis.verdict.Verdicts`
    at ``contexts[i]``), with the position bucket each context's acceptance came from."""

    contexts: tuple[int, ...]
    by_context: tuple[Verdicts, ...]
    buckets: tuple[str, ...]
    settings: str

    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(c.candidate for c in self.by_context[0].candidates)

    def at(self, context: int) -> Verdicts:
        """The verdicts at ``context`` (one of :attr:`contexts`)."""
        if context not in self.contexts:
            raise InputError(f"context {context} was not judged; the contexts are {list(self.contexts)}.")
        return self.by_context[self.contexts.index(context)]

    def cell(self, candidate: str, context: int) -> CandidateVerdict:
        return self.at(context)[candidate]

    def stops_paying_at(self, candidate: str) -> int | None:
        """The first judged context from which ``candidate`` is NO-GO at every longer one (None: it is not NO-GO at
        the longest)."""
        calls = [self.cell(candidate, c).verdict for c in self.contexts]
        if calls[-1] != "NO-GO":
            return None
        i = len(calls)
        while i > 0 and calls[i - 1] == "NO-GO":
            i -= 1
        return self.contexts[i]

    def summary(self, candidate: str) -> str:
        at = self.stops_paying_at(candidate)
        calls = [self.cell(candidate, c).verdict for c in self.contexts]
        if at is None:
            return ("pays at every judged context" if all(v == "GO" for v in calls) else
                    f"{calls[-1]} at context {self.contexts[-1]}")
        if at == self.contexts[0]:
            return "NO-GO at every judged context"
        return f"NO-GO from context {at}"

    def headline(self) -> str:
        return f"Verdict per candidate by context length ({self.settings})"

    def _cell_text(self, v: CandidateVerdict) -> str:
        return f"{v.verdict} k={v.steps} {v.speedup.text(2)}x AL {v.accept_length.text(2)}"

    def __str__(self) -> str:
        rows = [[name] + [self._cell_text(self.cell(name, c)) for c in self.contexts] + [self.summary(name)]
                for name in self.candidates]
        head = ["candidate"] + [f"context {c}" for c in self.contexts] + ["stops paying"]
        return (self.headline() + "\n" + text_table(head, rows) + "\n" + "\n".join(self._notes()))

    __repr__ = __str__

    def _notes(self) -> list[str]:
        return [f"context {c}: accept length measured at positions {b} (the cycles starting there)"
                for c, b in zip(self.contexts, self.buckets)] + [
            "speedup against no speculation with its 95% interval; AL = accept length at k with the bucket's 95% "
            "interval; TOO CLOSE TO CALL where either reading of the verify or either end of the accept length's "
            "interval gives another verdict"]

    def _repr_html_(self) -> str:
        def cell(v: CandidateVerdict) -> Html:
            return Html(f"{html_badge(v.verdict, _COLOUR[v.verdict])}<br>k = {v.steps}, "
                        f"{html.escape(v.speedup.text(2))}x<br><small>AL {html.escape(v.accept_length.text(2))}</small>")

        rows = [[name] + [cell(self.cell(name, c)) for c in self.contexts] + [self.summary(name)]
                for name in self.candidates]
        head = ["candidate"] + [f"context {c}" for c in self.contexts] + ["stops paying"]
        data = ";".join(f"{n}@{c}={self.cell(n, c).verdict}" for n in self.candidates for c in self.contexts)
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self._notes())
        return Html(f'<div class="eaglekit-context-verdict" data-verdicts="{html.escape(data)}">'
                    f"{html_table(head, rows, caption=self.headline())}<ul>{notes}</ul></div>")

    def to_json(self) -> dict[str, Any]:
        return {"settings": self.settings, "contexts": list(self.contexts), "buckets": list(self.buckets),
                "candidates": {n: {"stops_paying_at": self.stops_paying_at(n),
                                   "by_context": [self.cell(n, c).to_json() for c in self.contexts]}
                               for n in self.candidates}}


def position_json(result: Any, buckets: int | Sequence[int], *, max_steps: int | None = None) -> dict[str, Any]:
    """``result``'s accept length by position as ``eaglekit acceptance --by-position --json`` prints it: the buckets
    at the measured K (``by_position``) and, where the measurement kept every K's cycles, the same buckets read at
    K = 1..``max_steps`` (``by_position_by_steps``), which the plan reads as the accept length at each k."""
    from eaglekit.analysis.acceptance.positions import bucket_edges

    if getattr(result, "cycle_log", None) is None or not len(result.cycle_log):
        raise InputError("this result kept no cycle positions: measure it with eaglekit to plan by context.")
    edges = bucket_edges(result.cycle_log.position, buckets)
    deepest = min(max_steps or result.steps, result.steps)
    out: dict[str, Any] = {"by_position": result.at_steps(deepest).by_position(edges).to_json()}
    if len(getattr(result, "cycle_logs", ())) >= deepest:
        out["by_position_by_steps"] = [result.at_steps(k).by_position(edges).to_json() for k in range(1, deepest + 1)]
    return out


def bucket_acceptance(result: Any, contexts: Sequence[int], buckets: int | Sequence[int], *, max_steps: int = 4,
                      what: str = "acceptance", end: str = "value") -> list[Acceptance]:
    """The plan's acceptance at each of ``contexts`` from ``result``'s bucket holding it, read as ``eaglekit plan
    --contexts`` reads the result's JSON (:func:`~eaglekit.core.serving.context.acceptance_at_contexts`; ``end``
    "low" or "high": at that end of each K's interval). A context outside every bucket is refused here."""
    data = position_json(result, buckets, max_steps=max_steps)
    measured = data["by_position"]["buckets"]     # the buckets with cycles (an empty one is left out)
    for c in check_contexts(contexts):
        if not any(b["start"] <= c < b["end"] for b in measured):
            spans = ", ".join(f"{b['start']}-{b['end'] - 1}" for b in measured)
            raise InputError(f"{what}: context {c} lies outside the measured positions ({spans}); measure on prompts "
                             "that long, or judge at a context inside them.")
    return acceptance_at_contexts(data, contexts, what=what, end=end)


def plan_from_buckets(result: Any, contexts: Sequence[int], buckets: int | Sequence[int], *, max_steps: int = 4,
                      what: str = "acceptance", **plan_args: Any):
    """``result`` (an eaglekit measurement) planned by (batch size, context length): at each context the acceptance
    of the bucket holding it, and the plans at the ends of its interval (:func:`bucket_acceptance`,
    :func:`~eaglekit.analysis.serving.context_plan.plan_by_context`)."""
    from eaglekit.analysis.serving.context_plan import plan_by_context

    at = {end: bucket_acceptance(result, contexts, buckets, max_steps=max_steps, what=what, end=end)
          for end in ("value", "low", "high")}
    return plan_by_context(at["value"], contexts, acceptance_bounds=list(zip(at["low"], at["high"])),
                           max_steps=max_steps, **plan_args)


def _bucket_json(data: Mapping[str, Any], k: int, context: int) -> Mapping[str, Any]:
    """The bucket holding ``context`` in the profile read at K = ``k`` (the measured K's where no other was kept)."""
    profiles = data.get("by_position_by_steps") or [data["by_position"]]
    prof = profiles[min(k, len(profiles)) - 1]
    return next(b for b in prof["buckets"] if b["start"] <= context < b["end"])


def judge_by_context(results: Mapping[str, Any], contexts: Sequence[int], buckets: int | Sequence[int], *,
                     costs: Any, measured: Any, target: str, gpu: str, tp: int, batch: int = 1,
                     max_steps: int = 4, gpu_assumed: bool = False) -> ContextVerdicts:
    """Each EAGLE-3 candidate of ``results`` (name -> :class:`~eaglekit.AcceptanceResult` measured with eaglekit,
    which keeps every cycle's position) judged at each of ``contexts`` on the deployment :func:`judge` takes, with
    the accept length of the position bucket (``buckets``: edges or a count) holding the context, at every K up to
    ``max_steps``. Every context must lie inside a measured bucket."""
    contexts = check_contexts(contexts)
    if not results:
        raise InputError("judge_by_context needs at least one candidate's acceptance.")
    for name, r in results.items():
        if getattr(r, "family", "eagle3") != "eagle3":
            raise InputError(f"{name}: block drafters are not judged by context yet; give EAGLE-3 measurements.")
    at = {name: {end: bucket_acceptance(r, contexts, buckets, max_steps=max_steps, what=name, end=end)
                 for end in ("value", "low", "high")} for name, r in results.items()}
    edges = {name: position_json(r, buckets, max_steps=max_steps) for name, r in results.items()}
    per_context, labels = [], []
    for i, c in enumerate(contexts):
        kw = dict(costs=costs, measured=measured, target=target, gpu=gpu, tp=tp, context=c, batch=batch,
                  max_steps=max_steps, gpu_assumed=gpu_assumed)
        ends = {end: judge({n: at[n][end][i] for n in results}, **kw) for end in ("value", "low", "high")}
        out, spans = [], []
        for name in results:
            v = ends["value"][name]
            calls = {v.verdict, ends["low"][name].verdict, ends["high"][name].verdict}
            bucket = _bucket_json(edges[name], v.steps, c)
            spans.append(f"{bucket['start']}-{bucket['end'] - 1}")
            al = Interval(bucket["accept_length"], bucket.get("accept_length_low"), bucket.get("accept_length_high"),
                          bucket.get("accept_length_interval") or "")
            out.append(replace(v, verdict=v.verdict if len(calls) == 1 else "TOO CLOSE TO CALL", accept_length=al))
        labels.append(" / ".join(dict.fromkeys(spans)))
        main = ends["value"]
        per_context.append(Verdicts(tuple(out), main.settings, main.next_runs))
    settings = (f"batch {batch}, {target} on {tp} x {gpu}{' (assumed)' if gpu_assumed else ''}; each context's "
                "acceptance measured at the positions holding it")
    return ContextVerdicts(contexts, tuple(per_context), tuple(labels), settings)
